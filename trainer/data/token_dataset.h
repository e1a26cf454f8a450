// Training and validation batches drawn from a memory-mapped token file
// (see token_file.h).

#ifndef SPOTPS_TRAINER_DATA_TOKEN_DATASET_H_
#define SPOTPS_TRAINER_DATA_TOKEN_DATASET_H_

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/data/mapped_file.h"
#include "trainer/data/token_file.h"

namespace spotps {

// One batch of next-token examples: targets[b][t] == inputs[b][t + 1] of
// the same text window. Both int64 [batch, seq_len], contiguous.
struct TokenBatch {
  torch::Tensor inputs;
  torch::Tensor targets;
};

class ValidationBatchIterator;

// Owns a validated, read-only mapping of one token file. Batches are pure
// functions of their arguments, so any worker can rebuild any work unit's
// batch, and concurrent calls are safe.
class TokenDataset {
 public:
  // Maps `path` and checks its header, size, payload checksum and ids (see
  // ParseTokenFile); a corrupt or truncated file is DataLoss with a message
  // saying what is wrong, prefixed with the path.
  static absl::StatusOr<TokenDataset> Open(const std::string& path,
                                           TokenFileFormat format = TokenFileFormat::kSpotps);

  int64_t num_train_tokens() const;
  int64_t num_val_tokens() const;
  // The tokenizer's vocabulary (65536 for raw_u16 files); the ids all lie
  // below header().max_token_id + 1, which is what a model must cover
  // (CheckTokenFileFitsModel).
  int64_t vocab_size() const;
  const TokenFileHeader& header() const { return header_; }
  const std::string& path() const { return file_.path(); }

  // `batch_size` windows of seq_len + 1 consecutive train tokens, each
  // starting at a position derived only from (seed, unit, sample index
  // within the unit). FailedPrecondition if the train split is shorter than
  // one window; InvalidArgument for non-positive sizes.
  absl::StatusOr<TokenBatch> TrainBatch(uint64_t seed, uint64_t unit, int64_t batch_size,
                                        int64_t seq_len) const;

  // Fixed, non-overlapping windows spread evenly over the whole validation
  // split: every window that fits, but at most batch_size * max_batches.
  // The last batch may be smaller than batch_size.
  absl::StatusOr<ValidationBatchIterator> ValidationBatches(int64_t batch_size, int64_t seq_len,
                                                            int64_t max_batches) const;

 private:
  friend class ValidationBatchIterator;

  TokenDataset(ReadOnlyMappedFile file, const TokenFileHeader& header);

  // Copies the windows starting at `starts` (token offsets into `split`).
  TokenBatch GatherWindows(const uint8_t* split, const std::vector<int64_t>& starts,
                           int64_t seq_len) const;

  ReadOnlyMappedFile file_;
  TokenFileHeader header_;
  const uint8_t* train_;       // Into file_'s mapping.
  const uint8_t* validation_;  // Into file_'s mapping.
};

// Yields the validation batches of one TokenDataset::ValidationBatches()
// call in a fixed order. The dataset must outlive the iterator.
class ValidationBatchIterator {
 public:
  int64_t num_batches() const;
  int64_t num_windows() const { return num_windows_; }

  // The next batch, or nullopt once all num_batches() were returned.
  std::optional<TokenBatch> Next();

 private:
  friend class TokenDataset;

  ValidationBatchIterator(const TokenDataset* dataset, int64_t batch_size, int64_t seq_len,
                          int64_t num_windows);
  int64_t WindowStart(int64_t window) const;

  const TokenDataset* dataset_;
  int64_t batch_size_;
  int64_t seq_len_;
  int64_t num_windows_;
  int64_t next_window_ = 0;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_TOKEN_DATASET_H_
