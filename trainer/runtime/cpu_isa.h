// What the processor can do for BF16 matrix math: the instruction-set
// extensions it has, the best level they add up to, and the Linux
// permission AMX needs before its tile registers may be touched.

#ifndef SPOTPS_TRAINER_RUNTIME_CPU_ISA_H_
#define SPOTPS_TRAINER_RUNTIME_CPU_ISA_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

// The extensions oneDNN's BF16 and FP32 kernels are chosen by. A flag is set
// only when both the processor and the operating system enable it.
struct CpuFeatures {
  bool avx2 = false;
  bool avx512f = false;
  bool avx512_core = false;  // avx512f + dq + bw + vl, oneDNN's avx512_core.
  bool avx512_bf16 = false;
  bool amx_tile = false;
  bool amx_bf16 = false;

  bool has_amx() const { return amx_tile && amx_bf16; }
  bool operator==(const CpuFeatures& other) const;
};

// Capability levels, weakest first; each implies the ones before it.
enum class CpuIsa { kBaseline, kAvx2, kAvx512Core, kAvx512Bf16, kAmxBf16 };

// "baseline", "avx2", "avx512_core", "avx512_bf16" or "amx_bf16".
absl::string_view CpuIsaName(CpuIsa isa);

// The strongest level `features` supports.
CpuIsa BestCpuIsa(const CpuFeatures& features);

// Reads CPUID, masked by the register state the OS enabled in XCR0 (a
// processor with AVX-512 is no use if the kernel does not save zmm state).
// Returns no features on non-x86 builds.
CpuFeatures DetectCpuFeatures();

// Parses the first "flags" line of /proc/cpuinfo-formatted text.
CpuFeatures CpuFeaturesFromCpuinfo(absl::string_view cpuinfo);

// CpuFeaturesFromCpuinfo() of the file at `path`.
absl::StatusOr<CpuFeatures> ReadCpuinfoFeatures(const std::string& path = "/proc/cpuinfo");

// Linux (>= 5.16) hands out AMX tile data state per process on request; an
// AMX instruction without it kills the process with SIGILL.
// RequestAmxPermission() asks for it (a no-op if already granted) and
// reports why when the kernel refuses.
absl::Status RequestAmxPermission();
bool HasAmxPermission();

}  // namespace spotps

#endif  // SPOTPS_TRAINER_RUNTIME_CPU_ISA_H_
