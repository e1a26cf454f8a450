// Command-line flags that pick the model (--model preset plus per-dimension
// overrides) and its compute threads, shared by every binary that builds a
// GptModel.
#ifndef SPOTPS_TRAINER_MODEL_MODEL_FLAGS_H_
#define SPOTPS_TRAINER_MODEL_MODEL_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "trainer/model/gpt_config.h"
#include "trainer/runtime/compute_runtime.h"

ABSL_DECLARE_FLAG(std::string, model);

namespace spotps {

// The preset named by --model with --n_layer, --n_head, --d_model,
// --context_len and --vocab_size applied on top (0 keeps the preset's).
absl::StatusOr<GptConfig> GptConfigFromFlags();

// --dtype and --threads, for ConfigureComputeRuntime(). INVALID_ARGUMENT
// for a --dtype other than bf16 or fp32.
absl::StatusOr<ComputeRuntimeOptions> ComputeRuntimeOptionsFromFlags();

}  // namespace spotps

#endif  // SPOTPS_TRAINER_MODEL_MODEL_FLAGS_H_
