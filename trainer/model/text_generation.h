// Autoregressive sampling from a language model (task lm), used to show
// what a set of trained weights has learned.

#ifndef SPOTPS_TRAINER_MODEL_TEXT_GENERATION_H_
#define SPOTPS_TRAINER_MODEL_TEXT_GENERATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "trainer/model/trainable_model.h"
#include "trainer/runtime/compute_precision.h"

namespace spotps {

// How Generate() turns logits into tokens.
struct GenerationOptions {
  int64_t max_new_tokens = 256;
  double temperature = 1.0;  // <= 0 picks the most likely token (greedy).
  int64_t top_k = 0;         // > 0 samples only among the k likeliest.
  uint64_t seed = 0;         // Equal seeds give equal samples.
  ComputeDType dtype = ComputeDType::kFP32;
};

// Extends `prompt` (non-empty, ids < vocab_size) by up to max_new_tokens
// tokens and returns only the new ones. Each step conditions on the last
// context_len tokens (all of them if the model states no context length).
// The model runs in eval mode without autograd and is returned to its
// previous training mode afterwards. InvalidArgument for a classifier.
absl::StatusOr<std::vector<int64_t>> Generate(TrainableModel& model,
                                              absl::Span<const int64_t> prompt,
                                              const GenerationOptions& options);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_MODEL_TEXT_GENERATION_H_
