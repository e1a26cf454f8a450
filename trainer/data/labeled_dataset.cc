#include "trainer/data/labeled_dataset.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/little_endian.h"
#include "trainer/data/sample_hash.h"
#include "trainer/data/token_file.h"
#include "trainer/runtime/torch_status.h"

namespace spotps {
namespace {

template <int kBytes>
void CopyIds(const uint8_t* ids, uint32_t length, int64_t seq_len, int64_t* input_ids,
             int64_t* mask) {
  for (int64_t t = 0; t < seq_len; ++t) {
    input_ids[t] = TokenIdAt<kBytes>(ids, t);
    mask[t] = t < length ? 1 : 0;
  }
}

}  // namespace

absl::StatusOr<LabeledDataset> LabeledDataset::Open(const std::string& path) {
  absl::StatusOr<ReadOnlyMappedFile> file = ReadOnlyMappedFile::Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<LabeledFileHeader> header = ParseLabeledFile(file->bytes());
  if (!header.ok()) {
    return absl::Status(header.status().code(),
                        absl::StrCat(path, ": ", header.status().message()));
  }
  return LabeledDataset(*std::move(file), *std::move(header));
}

LabeledDataset::LabeledDataset(ReadOnlyMappedFile file, LabeledFileHeader header)
    : file_(std::move(file)),
      header_(std::move(header)),
      payload_(file_.bytes().data() + header_.payload_offset) {}

LabeledBatch LabeledDataset::Gather(const std::vector<int64_t>& indices) const {
  const int64_t batch_size = static_cast<int64_t>(indices.size());
  const int64_t seq_len = header_.seq_len;
  LabeledBatch batch{torch::empty({batch_size, seq_len}, torch::kLong),
                     torch::empty({batch_size, seq_len}, torch::kLong),
                     torch::empty({batch_size}, torch::kLong)};
  int64_t* input_ids = batch.input_ids.data_ptr<int64_t>();
  int64_t* mask = batch.attention_mask.data_ptr<int64_t>();
  int64_t* labels = batch.labels.data_ptr<int64_t>();
  const uint64_t record_bytes = LabeledRecordBytes(header_);
  for (int64_t b = 0; b < batch_size; ++b) {
    const char* record = reinterpret_cast<const char*>(payload_ + indices[b] * record_bytes);
    labels[b] = DecodeU32(record);
    const uint32_t length = DecodeU32(record + 4);
    const uint8_t* ids = reinterpret_cast<const uint8_t*>(record + 8);
    if (header_.token_bytes == 2) {
      CopyIds<2>(ids, length, seq_len, input_ids + b * seq_len, mask + b * seq_len);
    } else {
      CopyIds<4>(ids, length, seq_len, input_ids + b * seq_len, mask + b * seq_len);
    }
  }
  return batch;
}

absl::StatusOr<LabeledBatch> LabeledDataset::TrainBatch(uint64_t seed, uint64_t unit,
                                                        int64_t batch_size) const {
  if (batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size must be positive, got ", batch_size));
  }
  if (num_train_examples() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(path(), " has no train examples"));
  }
  std::vector<int64_t> indices(batch_size);
  for (int64_t b = 0; b < batch_size; ++b) {
    indices[b] = SamplePosition(seed, unit, b, header_.num_train);
  }
  return CatchTorchErrors([&] { return Gather(indices); });
}

int64_t LabeledDataset::NumValidationBatches(int64_t batch_size) const {
  if (batch_size <= 0) return 0;
  return (num_val_examples() + batch_size - 1) / batch_size;
}

absl::StatusOr<LabeledBatch> LabeledDataset::ValidationBatch(int64_t index,
                                                             int64_t batch_size) const {
  if (batch_size <= 0 || index < 0 || index >= NumValidationBatches(batch_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "validation batch ", index, " of size ", batch_size, " does not exist (",
        NumValidationBatches(batch_size), " batches of ", num_val_examples(), " examples)"));
  }
  const int64_t first = index * batch_size;
  const int64_t end = std::min(num_val_examples(), first + batch_size);
  std::vector<int64_t> indices;
  for (int64_t i = first; i < end; ++i) indices.push_back(num_train_examples() + i);
  return CatchTorchErrors([&] { return Gather(indices); });
}

}  // namespace spotps
