// Pretrained weights: loading a safetensors checkpoint into a model before it
// offers its weights to the cluster (--init_from), and reading logits for a
// check against another implementation.
#ifndef SPOTPS_TRAINER_MODEL_PRETRAINED_WEIGHTS_H_
#define SPOTPS_TRAINER_MODEL_PRETRAINED_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/model/gpt_model.h"
#include "trainer/runtime/compute_precision.h"

namespace spotps {

// Replaces every parameter of `model` with the file's. INVALID_ARGUMENT
// (naming the path and the tensor) for a malformed file or one whose names
// or shapes differ from the model's (another preset or dimension flag);
// the model is left unchanged then.
absl::Status LoadPretrainedWeights(GptModel& model, const std::string& path);

// The model's FP32 logits for one sequence, [tokens.size()][vocab], computed
// in `dtype` without autograd.
absl::StatusOr<std::vector<std::vector<float>>> LogitsFor(TrainableModel& model,
                                                          const std::vector<int64_t>& tokens,
                                                          ComputeDType dtype);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_MODEL_PRETRAINED_WEIGHTS_H_
