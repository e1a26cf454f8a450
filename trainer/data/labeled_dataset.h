// Batches of labeled examples drawn from a memory-mapped labeled-example
// file (see labeled_file.h), for fine-tuning a classifier.

#ifndef SPOTPS_TRAINER_DATA_LABELED_DATASET_H_
#define SPOTPS_TRAINER_DATA_LABELED_DATASET_H_

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/data/labeled_file.h"
#include "trainer/data/mapped_file.h"

namespace spotps {

// input_ids and attention_mask int64 [batch, seq_len] (mask 1 for the
// text's tokens, 0 for padding); labels int64 [batch]. All contiguous.
struct LabeledBatch {
  torch::Tensor input_ids;
  torch::Tensor attention_mask;
  torch::Tensor labels;
};

// Owns a validated, read-only mapping of one labeled-example file. Batches
// are pure functions of their arguments, so any worker can rebuild any
// work unit's batch, and concurrent calls are safe.
class LabeledDataset {
 public:
  // Maps `path` and checks it whole (ParseLabeledFile); a corrupt or
  // truncated file is DataLoss saying what is wrong, prefixed with the path.
  static absl::StatusOr<LabeledDataset> Open(const std::string& path);

  const LabeledFileHeader& header() const { return header_; }
  const std::string& path() const { return file_.path(); }
  int64_t num_classes() const { return static_cast<int64_t>(header_.label_names.size()); }
  // By label id.
  const std::vector<std::string>& label_names() const { return header_.label_names; }
  int64_t num_train_examples() const { return static_cast<int64_t>(header_.num_train); }
  int64_t num_val_examples() const { return static_cast<int64_t>(header_.num_val); }
  int64_t seq_len() const { return header_.seq_len; }

  // `batch_size` train examples, each chosen (with replacement) from
  // (seed, unit, index within the batch) only. FailedPrecondition if there
  // are no train examples; InvalidArgument for a non-positive batch_size.
  absl::StatusOr<LabeledBatch> TrainBatch(uint64_t seed, uint64_t unit, int64_t batch_size) const;

  // The validation split in file order, cut into batches of batch_size
  // (the last may be smaller): every example exactly once over
  // NumValidationBatches() batches.
  int64_t NumValidationBatches(int64_t batch_size) const;
  // InvalidArgument for a batch_size <= 0 or an index outside
  // [0, NumValidationBatches(batch_size)).
  absl::StatusOr<LabeledBatch> ValidationBatch(int64_t index, int64_t batch_size) const;

 private:
  LabeledDataset(ReadOnlyMappedFile file, LabeledFileHeader header);

  // Copies the examples at `indices` (into the whole payload: train first).
  LabeledBatch Gather(const std::vector<int64_t>& indices) const;

  ReadOnlyMappedFile file_;
  LabeledFileHeader header_;
  const uint8_t* payload_;  // Into file_'s mapping.
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_LABELED_DATASET_H_
