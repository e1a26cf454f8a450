// TrainingData: what a trainer trains on, whichever the task: a token file
// (next-token prediction, task lm) or a labeled-example file (text
// classification, task classify). The trainer's step loop, evaluation and
// start-up checks see only this.
#ifndef SPOTPS_TRAINER_DATA_TRAINING_DATA_H_
#define SPOTPS_TRAINER_DATA_TRAINING_DATA_H_

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/data/labeled_dataset.h"
#include "trainer/data/token_dataset.h"

namespace spotps {

enum class Task {
  kLanguageModel,   // "lm": logits [B, T, V] against the next tokens.
  kClassification,  // "classify": logits [B, C] against one label per row.
};
const char* TaskName(Task task);

// One batch, int64 and contiguous. input_ids [B, T]; attention_mask [B, T]
// (1: a token, 0: padding) for classification, undefined for lm; targets
// [B, T] next tokens (lm) or [B] labels (classify).
struct TrainingBatch {
  torch::Tensor input_ids;
  torch::Tensor attention_mask;
  torch::Tensor targets;

  int64_t rows() const { return input_ids.size(0); }
  // Rows [begin, end), as views.
  TrainingBatch Rows(int64_t begin, int64_t end) const;
};

// Owns one validated, memory-mapped data file. Batches are pure functions
// of their arguments, so any worker can rebuild any work unit's batch, and
// concurrent calls are safe.
class TrainingData {
 public:
  virtual ~TrainingData() = default;

  virtual Task task() const = 0;
  virtual const std::string& path() const = 0;
  // Tokens per sequence the file fixes (labeled files), or 0: any length.
  virtual int64_t fixed_seq_len() const = 0;
  // The largest token id in the file, which the model's vocabulary must
  // hold; and the classes (0 for lm).
  virtual int64_t max_token_id() const = 0;
  virtual int64_t num_classes() const = 0;
  // Work units of `batch_size` x `seq_len` in one pass over the train split.
  virtual int64_t BatchesPerEpoch(int64_t batch_size, int64_t seq_len) const = 0;

  // The batch of work unit `unit` (lm: windows of seq_len + 1 tokens;
  // classify: examples of the file's seq_len).
  virtual absl::StatusOr<TrainingBatch> TrainBatch(uint64_t seed, uint64_t unit,
                                                   int64_t batch_size, int64_t seq_len) const = 0;
  // Calls `visit` on fixed validation batches (at most max_batches, the
  // same ones for the same arguments) in order; stops at the first error.
  // FailedPrecondition if the validation split has none.
  virtual absl::Status ForEachValidationBatch(
      int64_t batch_size, int64_t seq_len, int64_t max_batches,
      const std::function<absl::Status(const TrainingBatch&)>& visit) const = 0;

  // InvalidArgument, naming the file and the rule, unless a model with this
  // vocabulary (and, for classification, these classes; 0: not said) can
  // train on the file.
  absl::Status CheckFitsModel(int64_t vocab_size, int64_t num_classes) const;
};

// Opens a token file (in `format`) or a labeled-example file, told apart by
// their first bytes; errors name the path.
absl::StatusOr<std::unique_ptr<TrainingData>> OpenTrainingData(const std::string& path,
                                                               TokenFileFormat format);

// The dataset behind `data`, or null for the other task (generation and
// the safetensors tools need the token file itself).
const TokenDataset* AsTokenDataset(const TrainingData& data);
const LabeledDataset* AsLabeledDataset(const TrainingData& data);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_TRAINING_DATA_H_
