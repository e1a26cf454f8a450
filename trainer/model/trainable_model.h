// TrainableModel: what the trainer needs of a model, whichever it is: the
// built-in GPT (--model=tiny|small|gpt2-124m) or a TorchScript file a user
// brings (--model=PATH.pt). The shards see only its named FP32 parameters.
#ifndef SPOTPS_TRAINER_MODEL_TRAINABLE_MODEL_H_
#define SPOTPS_TRAINER_MODEL_TRAINABLE_MODEL_H_

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/data/training_data.h"
#include "trainer/runtime/compute_precision.h"

namespace spotps {

// Sizes a model states about itself; 0 where it does not say.
struct ModelLimits {
  int64_t context_len = 0;  // Longest input.
  int64_t vocab_size = 0;   // Token ids it embeds (and, for lm, predicts).
  int64_t num_classes = 0;  // Classification only.
};

// Owns one model's parameters and computation. Promises: Parameters() lists
// the trained tensors in the same order every time, each once (a tied
// tensor under its first name), FP32 and contiguous, so that it is the
// shards' layout; Forward() returns FP32 logits, [B, T, V] for lm and
// [B, C] for classify.
class TrainableModel {
 public:
  virtual ~TrainableModel() = default;

  virtual Task task() const = 0;
  virtual ModelLimits limits() const = 0;
  // "tiny", "model.pt (TorchScript)": for messages and the start line.
  virtual std::string name() const = 0;
  // False for a model whose parameters are placeholders to be overwritten
  // (a joining worker's built-in GPT): they must never become the job's.
  virtual bool has_initial_values() const = 0;

  virtual std::vector<std::pair<std::string, torch::Tensor>> Parameters() = 0;
  // Logits for `batch` (its input_ids, and attention_mask for classify),
  // under the caller's precision scope and grad mode. Throws c10::Error on
  // bad input; callers go through ComputeLoss or Evaluate.
  virtual torch::Tensor Forward(const TrainingBatch& batch) = 0;
  virtual void SetTraining(bool training) = 0;
  virtual bool training() const = 0;

  // --init_from: replaces parameters with a safetensors file's, the way the
  // model names them (the built-in GPT: Hugging Face GPT-2 names, every
  // tensor required). Returns a line saying what was loaded; on an error
  // nothing changed.
  virtual absl::StatusOr<std::string> LoadWeightsFile(const std::string& path) = 0;
};

// Mean cross-entropy of `logits` [B, T, V] against next-token `targets`
// [B, T] (int64), computed in FP32 whatever the autocast state.
torch::Tensor NextTokenCrossEntropy(const torch::Tensor& logits, const torch::Tensor& targets);

// The mean cross-entropy of `model` on `batch` at `dtype`, in FP32, ready
// for backward(): lm against the next tokens, classify against the labels.
// InvalidArgument for bad shapes or ids, or logits of the wrong rank or
// size for the task.
absl::StatusOr<torch::Tensor> ComputeLoss(TrainableModel& model, const TrainingBatch& batch,
                                          ComputeDType dtype);

// InvalidArgument, naming the model, the data and the rule, unless they
// agree: the same task; positive sizes; seq_len within the model's context
// (and equal to a labeled file's own); the data's ids within the model's
// vocabulary and its labels its classes, where the model states them.
absl::Status CheckModelFitsData(const TrainableModel& model, const TrainingData& data,
                                int64_t batch_size, int64_t seq_len);

// CheckModelFitsData, then one forward pass without autograd over the first
// rows of a real train batch at `dtype`: logits of the task's shape (lm:
// [B, T, V] with V above the data's largest id; classify: [B, C] with C the
// data's labels) and a finite loss. A trainer runs it before it contacts
// anything, so a broken model never reaches the shards.
absl::Status ProbeModel(TrainableModel& model, const TrainingData& data, int64_t seq_len,
                        ComputeDType dtype);

// Loss and, for classification, accuracy on a data file's fixed validation
// batches, without autograd; the model goes back to its training mode.
struct Evaluation {
  double loss = 0;
  double accuracy = -1;  // Fraction of rows whose argmax is the label; -1 for lm.
  int64_t rows = 0;
};
absl::StatusOr<Evaluation> Evaluate(TrainableModel& model, const TrainingData& data,
                                    int64_t batch_size, int64_t seq_len, int64_t max_batches,
                                    ComputeDType dtype);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_MODEL_TRAINABLE_MODEL_H_
