// Process-wide compute set-up for training on CPUs: which ISA oneDNN may
// use, how many threads LibTorch and OpenBLAS run, and the start-up line
// that records it.

#ifndef SPOTPS_TRAINER_RUNTIME_COMPUTE_RUNTIME_H_
#define SPOTPS_TRAINER_RUNTIME_COMPUTE_RUNTIME_H_

#include <string>

#include "absl/status/statusor.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "trainer/runtime/compute_precision.h"
#include "trainer/runtime/cpu_isa.h"

namespace spotps {

struct ComputeRuntimeOptions {
  int threads = 0;  // Intra-op threads; 0 means one per physical core.
  // OpenBLAS serves only FP32 GEMMs (BF16 ones run in oneDNN on the
  // intra-op pool). Its workers spin for a long while after each call and
  // starve LibTorch's OpenMP workers, so by default it gets one thread;
  // 0 means as many as `threads`.
  int blas_threads = 1;
  ComputeDType dtype = ComputeDType::kBF16;
};

// What ConfigureComputeRuntime() found and set.
struct ComputeRuntimeInfo {
  CpuIsa isa_found = CpuIsa::kBaseline;           // What the CPU offers.
  dnnl::cpu_isa isa_onednn = dnnl::cpu_isa::all;  // What oneDNN will use.
  int threads = 1;
  ComputeDType dtype = ComputeDType::kBF16;
  int blas_threads = 0;   // 0 when OpenBLAS is not loaded.
  std::string blas_core;  // OpenBLAS's kernel family, "" without OpenBLAS.
};

// Call early in main(), before any LibTorch or oneDNN computation: oneDNN
// (which LibTorch shares) fixes its ISA at first use. Detects the CPU,
// requests AMX tile permission and lifts oneDNN's ISA cap to AMX where the
// CPU has it, then sets LibTorch's intra-op and OpenBLAS's thread counts.
// Warns loudly on stderr when the CPU has AMX but oneDNN will not use it,
// when BF16 is asked for without native BF16, and, for FP32, when OpenBLAS
// runs generic kernels (naming the OPENBLAS_CORETYPE that fixes it). Safe to
// call again to change threads; the ISA is configured by the first call only.
absl::StatusOr<ComputeRuntimeInfo> ConfigureComputeRuntime(const ComputeRuntimeOptions& options);

// "runtime: cpu_isa=<name> onednn_isa=<name> threads=<n> dtype=<bf16|fp32>".
std::string RuntimeLine(const ComputeRuntimeInfo& info);

// oneDNN's spelling of an ISA ("avx512_core_bf16", "avx512_core_amx", ...),
// or its hex value when unnamed.
std::string OneDnnIsaName(dnnl::cpu_isa isa);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_RUNTIME_COMPUTE_RUNTIME_H_
