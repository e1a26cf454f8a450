#include "trainer/runtime/openblas.h"

#include <dlfcn.h>

namespace spotps {
namespace {

template <typename Function>
Function* FindOpenBlasSymbol(const char* name) {
  return reinterpret_cast<Function*>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

std::optional<std::string> OpenBlasCoreName() {
  auto* core_name = FindOpenBlasSymbol<char*()>("openblas_get_corename");
  if (core_name == nullptr) return std::nullopt;
  return std::string(core_name());
}

bool SetOpenBlasThreads(int threads) {
  auto* set_threads = FindOpenBlasSymbol<void(int)>("openblas_set_num_threads");
  if (set_threads == nullptr) return false;
  set_threads(threads);
  return true;
}

absl::string_view SuggestedOpenBlasCoreType(const CpuFeatures& features) {
  if (features.avx512_core && features.avx512_bf16) return "Cooperlake";
  if (features.avx512_core) return "SkylakeX";
  if (features.avx2) return "Haswell";
  return "";
}

bool OpenBlasUnderusesCpu(absl::string_view core_name, const CpuFeatures& features) {
  // The pre-AVX2 families OpenBLAS falls back to for unknown CPUs.
  for (absl::string_view generic :
       {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Sandybridge"}) {
    if (core_name == generic) return features.avx2;
  }
  return false;
}

}  // namespace spotps
