#include "trainer/runtime/compute_precision.h"

#include <ATen/autocast_mode.h>

#include "absl/strings/str_cat.h"

namespace spotps {

absl::string_view ComputeDTypeName(ComputeDType dtype) {
  switch (dtype) {
    case ComputeDType::kBF16:
      return "bf16";
    case ComputeDType::kFP32:
      return "fp32";
  }
  return "unknown";
}

absl::StatusOr<ComputeDType> ParseComputeDType(absl::string_view name) {
  for (ComputeDType dtype : {ComputeDType::kBF16, ComputeDType::kFP32}) {
    if (name == ComputeDTypeName(dtype)) return dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown compute dtype '", name, "'; expected bf16 or fp32"));
}

ComputePrecisionScope::ComputePrecisionScope(ComputeDType dtype)
    : previous_enabled_(at::autocast::is_cpu_enabled()),
      previous_dtype_(at::autocast::get_autocast_cpu_dtype()) {
  at::autocast::set_cpu_enabled(dtype == ComputeDType::kBF16);
  at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
}

ComputePrecisionScope::~ComputePrecisionScope() {
  // Dropped on every exit, nested or not: a cached BF16 copy that outlives
  // an optimizer update would feed stale weights to the next forward pass.
  at::autocast::clear_cache();
  at::autocast::set_cpu_enabled(previous_enabled_);
  at::autocast::set_autocast_cpu_dtype(previous_dtype_);
}

}  // namespace spotps
