#include "trainer/runtime/compute_runtime.h"

#include <ATen/Parallel.h>

#include <cstdio>

#include "common/log.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "trainer/runtime/cpu_topology.h"
#include "trainer/runtime/openblas.h"

namespace spotps {
namespace {

void WarnLoudly(const std::string& message) {
  LogWarningF("*** WARNING: %s ***", message);
}

// oneDNN fixes its ISA on first use, so this must run before any LibTorch
// kernel; only the first call in a process can change anything.
dnnl::cpu_isa ConfigureOneDnnIsa(const CpuFeatures& features) {
  if (features.has_amx()) {
    if (absl::Status status = RequestAmxPermission(); !status.ok()) {
      WarnLoudly(absl::StrCat("AMX tile permission refused: ", status.ToString()));
    }
    if (dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx512_core_amx) != dnnl::status::success) {
      WarnLoudly(
          "oneDNN's ISA was already fixed: something ran a oneDNN kernel "
          "before ConfigureComputeRuntime()");
    }
  }
  const dnnl::cpu_isa effective = dnnl::get_effective_cpu_isa();
  if (features.has_amx() && effective != dnnl::cpu_isa::avx512_core_amx) {
    WarnLoudly(absl::StrCat("this CPU has AMX (amx_tile, amx_bf16) but oneDNN will use ",
                            OneDnnIsaName(effective),
                            "; BF16 matmuls will run several times slower than they could"));
  }
  return effective;
}

void WarnAboutPrecision(const ComputeRuntimeInfo& info, const CpuFeatures& features) {
  if (info.dtype == ComputeDType::kBF16 && !features.avx512_bf16) {
    WarnLoudly(absl::StrCat("dtype=bf16 on a CPU without avx512_bf16 (best: ",
                            CpuIsaName(info.isa_found), "); BF16 math will be emulated and slow"));
  }
  if (info.dtype == ComputeDType::kFP32 && OpenBlasUnderusesCpu(info.blas_core, features)) {
    WarnLoudly(absl::StrCat("OpenBLAS does not recognise this CPU and runs its generic ",
                            info.blas_core,
                            " kernels, so FP32 matmuls are several times slower; "
                            "start the process with OPENBLAS_CORETYPE=",
                            SuggestedOpenBlasCoreType(features)));
  }
}

}  // namespace

std::string OneDnnIsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::all:
      return "all";
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return absl::StrFormat("0x%x", static_cast<int>(isa));
  }
}

absl::StatusOr<ComputeRuntimeInfo> ConfigureComputeRuntime(const ComputeRuntimeOptions& options) {
  if (options.threads < 0 || options.blas_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "thread counts must be positive (or 0 for the default), got threads=", options.threads,
        " blas_threads=", options.blas_threads));
  }
  const CpuFeatures features = DetectCpuFeatures();
  static const dnnl::cpu_isa onednn_isa = ConfigureOneDnnIsa(features);

  ComputeRuntimeInfo info;
  info.isa_found = BestCpuIsa(features);
  info.isa_onednn = onednn_isa;
  info.dtype = options.dtype;
  info.threads = options.threads > 0 ? options.threads : CountPhysicalCores();
  at::set_num_threads(info.threads);
  const int blas_threads = options.blas_threads > 0 ? options.blas_threads : info.threads;
  if (SetOpenBlasThreads(blas_threads)) {
    info.blas_threads = blas_threads;
    info.blas_core = OpenBlasCoreName().value_or("");
  }
  WarnAboutPrecision(info, features);
  return info;
}

std::string RuntimeLine(const ComputeRuntimeInfo& info) {
  return absl::StrCat("runtime: cpu_isa=", CpuIsaName(info.isa_found),
                      " onednn_isa=", OneDnnIsaName(info.isa_onednn), " threads=", info.threads,
                      " dtype=", ComputeDTypeName(info.dtype));
}

}  // namespace spotps
