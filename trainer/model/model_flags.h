// Command-line flags that pick the model (--model: a preset plus
// per-dimension overrides, or a TorchScript file) and its compute threads,
// shared by every binary that builds a model.
#ifndef SPOTPS_TRAINER_MODEL_MODEL_FLAGS_H_
#define SPOTPS_TRAINER_MODEL_MODEL_FLAGS_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "trainer/model/gpt_config.h"
#include "trainer/model/trainable_model.h"
#include "trainer/runtime/compute_runtime.h"

ABSL_DECLARE_FLAG(std::string, model);

namespace spotps {

// The preset named by --model with --n_layer, --n_head, --d_model,
// --context_len and --vocab_size applied on top (0 keeps the preset's).
absl::StatusOr<GptConfig> GptConfigFromFlags();

// The model --model names: a TorchScript file (torchscript_model.h; the
// dimension flags must be left alone), or a preset drawn from `seed`, or all
// zeros to be overwritten when `seed` is empty (a worker joining a job).
// InvalidArgument for an unknown preset, a file that breaks the contract,
// or dimension flags beside a file.
absl::StatusOr<std::unique_ptr<TrainableModel>> ModelFromFlags(std::optional<uint64_t> seed);

// --dtype and --threads, for ConfigureComputeRuntime(). INVALID_ARGUMENT
// for a --dtype other than bf16 or fp32.
absl::StatusOr<ComputeRuntimeOptions> ComputeRuntimeOptionsFromFlags();

}  // namespace spotps

#endif  // SPOTPS_TRAINER_MODEL_MODEL_FLAGS_H_
