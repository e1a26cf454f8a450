#include "trainer/model/gpt_config.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace spotps {
namespace {

struct GptPreset {
  absl::string_view name;
  GptConfig config;
};

// vocab_size, context_len, n_layer, n_head, d_model, dropout.
constexpr std::array<GptPreset, 3> kPresets = {{
    {"tiny", {256, 128, 4, 4, 128, 0.0}},
    {"small", {256, 256, 6, 6, 384, 0.0}},
    {"gpt2-124m", {50257, 1024, 12, 12, 768, 0.0}},
}};

absl::Status RequirePositive(absl::string_view field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("GptConfig.", field, " must be positive, got ", value));
}

}  // namespace

std::vector<absl::string_view> GptPresetNames() {
  std::vector<absl::string_view> names;
  for (const GptPreset& preset : kPresets) names.push_back(preset.name);
  return names;
}

absl::StatusOr<GptConfig> GptConfigFromPreset(absl::string_view name) {
  for (const GptPreset& preset : kPresets) {
    if (preset.name == name) return preset.config;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model preset '", name, "'; known presets: ", absl::StrJoin(GptPresetNames(), ", ")));
}

absl::Status ValidateGptConfig(const GptConfig& config) {
  const std::pair<absl::string_view, int64_t> sizes[] = {{"vocab_size", config.vocab_size},
                                                         {"context_len", config.context_len},
                                                         {"n_layer", config.n_layer},
                                                         {"n_head", config.n_head},
                                                         {"d_model", config.d_model}};
  for (const auto& [field, value] : sizes) {
    if (absl::Status status = RequirePositive(field, value); !status.ok()) {
      return status;
    }
  }
  if (config.d_model % config.n_head != 0) {
    return absl::InvalidArgumentError(absl::StrCat("GptConfig.d_model (", config.d_model,
                                                   ") must be divisible by n_head (", config.n_head,
                                                   ")"));
  }
  if (!(config.dropout >= 0.0 && config.dropout < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GptConfig.dropout must be in [0, 1), got ", config.dropout));
  }
  return absl::OkStatus();
}

int64_t GptParameterCount(const GptConfig& config) {
  const int64_t d = config.d_model;
  const int64_t layer_norm = 2 * d;
  const int64_t attention = (d * 3 * d + 3 * d) + (d * d + d);
  const int64_t mlp = (d * 4 * d + 4 * d) + (4 * d * d + d);
  const int64_t block = 2 * layer_norm + attention + mlp;
  const int64_t embeddings = config.vocab_size * d + config.context_len * d;
  return embeddings + config.n_layer * block + layer_norm;
}

}  // namespace spotps
