#include "trainer/data/token_dataset.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "trainer/data/sample_hash.h"
#include "trainer/runtime/torch_status.h"

namespace spotps {
namespace {

template <int kBytes>
void GatherWindowsOf(const uint8_t* split, const std::vector<int64_t>& starts, int64_t seq_len,
                     int64_t* inputs, int64_t* targets) {
  const int64_t batch_size = static_cast<int64_t>(starts.size());
  for (int64_t b = 0; b < batch_size; ++b) {
    for (int64_t t = 0; t < seq_len; ++t) {
      inputs[b * seq_len + t] = TokenIdAt<kBytes>(split, starts[b] + t);
      targets[b * seq_len + t] = TokenIdAt<kBytes>(split, starts[b] + t + 1);
    }
  }
}

absl::Status ValidateWindowRequest(int64_t batch_size, int64_t seq_len, int64_t split_tokens,
                                   absl::string_view split_name) {
  if (batch_size <= 0 || seq_len <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size and seq_len must be positive, got ",
                                                   batch_size, " and ", seq_len));
  }
  if (split_tokens < seq_len + 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("the ", split_name, " split has ", split_tokens,
                     " tokens, fewer than one window of seq_len + 1 = ", seq_len + 1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenDataset> TokenDataset::Open(const std::string& path,
                                               TokenFileFormat format) {
  absl::StatusOr<ReadOnlyMappedFile> file = ReadOnlyMappedFile::Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<TokenFileHeader> header = ParseTokenFile(file->bytes(), format);
  if (!header.ok()) {
    return absl::Status(header.status().code(),
                        absl::StrCat(path, ": ", header.status().message()));
  }
  return TokenDataset(*std::move(file), *header);
}

TokenDataset::TokenDataset(ReadOnlyMappedFile file, const TokenFileHeader& header)
    : file_(std::move(file)),
      header_(header),
      train_(file_.bytes().data() + header.payload_offset),
      validation_(train_ + header.num_train_tokens * header.token_bytes) {}

int64_t TokenDataset::num_train_tokens() const {
  return static_cast<int64_t>(header_.num_train_tokens);
}

int64_t TokenDataset::num_val_tokens() const {
  return static_cast<int64_t>(header_.num_val_tokens);
}

int64_t TokenDataset::vocab_size() const { return header_.tokenizer.vocab_size; }

// The width test is per batch, so neither width slows the other's loop.
TokenBatch TokenDataset::GatherWindows(const uint8_t* split, const std::vector<int64_t>& starts,
                                       int64_t seq_len) const {
  const int64_t batch_size = static_cast<int64_t>(starts.size());
  TokenBatch batch{torch::empty({batch_size, seq_len}, torch::kLong),
                   torch::empty({batch_size, seq_len}, torch::kLong)};
  int64_t* inputs = batch.inputs.data_ptr<int64_t>();
  int64_t* targets = batch.targets.data_ptr<int64_t>();
  if (header_.token_bytes == 2) {
    GatherWindowsOf<2>(split, starts, seq_len, inputs, targets);
  } else {
    GatherWindowsOf<4>(split, starts, seq_len, inputs, targets);
  }
  return batch;
}

absl::StatusOr<TokenBatch> TokenDataset::TrainBatch(uint64_t seed, uint64_t unit,
                                                    int64_t batch_size, int64_t seq_len) const {
  if (absl::Status status = ValidateWindowRequest(batch_size, seq_len, num_train_tokens(), "train");
      !status.ok()) {
    return status;
  }
  // A window needs seq_len + 1 tokens, so these are all the valid starts.
  const int64_t num_starts = num_train_tokens() - seq_len;
  std::vector<int64_t> starts(batch_size);
  for (int64_t b = 0; b < batch_size; ++b) {
    starts[b] = SamplePosition(seed, unit, b, static_cast<uint64_t>(num_starts));
  }
  return CatchTorchErrors([&] { return GatherWindows(train_, starts, seq_len); });
}

absl::StatusOr<ValidationBatchIterator> TokenDataset::ValidationBatches(int64_t batch_size,
                                                                        int64_t seq_len,
                                                                        int64_t max_batches) const {
  if (absl::Status status =
          ValidateWindowRequest(batch_size, seq_len, num_val_tokens(), "validation");
      !status.ok()) {
    return status;
  }
  if (max_batches <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batches must be positive, got ", max_batches));
  }
  // Windows that tile the split; the final token is only ever a target.
  const int64_t fitting_windows = (num_val_tokens() - 1) / seq_len;
  const int64_t num_windows = std::min(fitting_windows, batch_size * max_batches);
  return ValidationBatchIterator(this, batch_size, seq_len, num_windows);
}

ValidationBatchIterator::ValidationBatchIterator(const TokenDataset* dataset, int64_t batch_size,
                                                 int64_t seq_len, int64_t num_windows)
    : dataset_(dataset), batch_size_(batch_size), seq_len_(seq_len), num_windows_(num_windows) {}

int64_t ValidationBatchIterator::num_batches() const {
  return (num_windows_ + batch_size_ - 1) / batch_size_;
}

// Spreads the windows from the first possible start to the last. Their
// spacing is never below seq_len because at most (val - 1) / seq_len of
// them are asked for, so windows never overlap.
int64_t ValidationBatchIterator::WindowStart(int64_t window) const {
  if (num_windows_ <= 1) return 0;
  const int64_t last_start = dataset_->num_val_tokens() - 1 - seq_len_;
  return static_cast<int64_t>(static_cast<__int128>(window) * last_start / (num_windows_ - 1));
}

std::optional<TokenBatch> ValidationBatchIterator::Next() {
  if (next_window_ >= num_windows_) return std::nullopt;
  const int64_t end = std::min(num_windows_, next_window_ + batch_size_);
  std::vector<int64_t> starts;
  for (; next_window_ < end; ++next_window_) {
    starts.push_back(WindowStart(next_window_));
  }
  return dataset_->GatherWindows(dataset_->validation_, starts, seq_len_);
}

}  // namespace spotps
