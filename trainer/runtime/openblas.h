// The OpenBLAS library LibTorch calls for FP32 GEMMs (Debian's LibTorch
// links it). Its pthread pool is separate from LibTorch's OpenMP pool, and
// it chooses its kernels once, at load time, from the CPU model. Found at
// run time (dlsym) because other builds link other BLAS libraries.

#ifndef SPOTPS_TRAINER_RUNTIME_OPENBLAS_H_
#define SPOTPS_TRAINER_RUNTIME_OPENBLAS_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "trainer/runtime/cpu_isa.h"

namespace spotps {

// The kernel family OpenBLAS picked ("SkylakeX", "Prescott", ...), or
// nullopt when OpenBLAS is not loaded in this process.
std::optional<std::string> OpenBlasCoreName();

// Sets OpenBLAS's thread count; false when OpenBLAS is not loaded.
bool SetOpenBlasThreads(int threads);

// The OPENBLAS_CORETYPE value that gets the fastest kernels OpenBLAS 0.3.21
// has for `features` ("Cooperlake", "SkylakeX", "Haswell"), or "" when the
// CPU has none of their extensions. OpenBLAS reads the variable only at
// load time, so it must be in the environment before the process starts.
absl::string_view SuggestedOpenBlasCoreType(const CpuFeatures& features);

// True when OpenBLAS runs kernels weaker than `features` allow, as 0.3.21
// does on CPUs newer than it knows (it falls back to SSE3 "Prescott").
bool OpenBlasUnderusesCpu(absl::string_view core_name, const CpuFeatures& features);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_RUNTIME_OPENBLAS_H_
