// Shape of a GPT-style decoder-only transformer, and the named presets the
// trainer offers on its command line.

#ifndef SPOTPS_TRAINER_MODEL_GPT_CONFIG_H_
#define SPOTPS_TRAINER_MODEL_GPT_CONFIG_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

// Hyperparameters that fix the model's architecture and parameter layout.
// Two models built from equal configs have identical named_parameters().
struct GptConfig {
  int64_t vocab_size = 256;  // Byte-level tokens by default.
  int64_t context_len = 128;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t d_model = 128;
  double dropout = 0.0;
};

// Returns the config for a preset: "tiny" (~0.8M parameters), "small"
// (~10.8M) or "gpt2-124m" (GPT-2 small, 124M, 50257-token vocabulary).
// Unknown names give InvalidArgument listing the known ones.
absl::StatusOr<GptConfig> GptConfigFromPreset(absl::string_view name);

// The preset names GptConfigFromPreset() accepts, smallest first.
std::vector<absl::string_view> GptPresetNames();

// Returns InvalidArgument naming the first offending field when the config
// cannot describe a model (non-positive sizes, d_model not divisible by
// n_head, dropout outside [0, 1)).
absl::Status ValidateGptConfig(const GptConfig& config);

// Number of trainable scalars a model with this config holds, counting the
// tied token embedding / output head once. Computed without allocating.
int64_t GptParameterCount(const GptConfig& config);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_MODEL_GPT_CONFIG_H_
