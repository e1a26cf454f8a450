#include "trainer/data/training_data.h"

#include <fstream>

#include "absl/strings/str_cat.h"

namespace spotps {
namespace {

constexpr char kLabeledMagic[] = "SPLABELS";

class LanguageModelData final : public TrainingData {
 public:
  explicit LanguageModelData(TokenDataset data) : data_(std::move(data)) {}

  Task task() const override { return Task::kLanguageModel; }
  const std::string& path() const override { return data_.path(); }
  int64_t fixed_seq_len() const override { return 0; }
  int64_t max_token_id() const override { return data_.header().max_token_id; }
  int64_t num_classes() const override { return 0; }
  int64_t BatchesPerEpoch(int64_t batch_size, int64_t seq_len) const override {
    return std::max<int64_t>(1, data_.num_train_tokens() / std::max<int64_t>(1, batch_size * seq_len));
  }

  absl::StatusOr<TrainingBatch> TrainBatch(uint64_t seed, uint64_t unit, int64_t batch_size,
                                           int64_t seq_len) const override {
    absl::StatusOr<TokenBatch> b = data_.TrainBatch(seed, unit, batch_size, seq_len);
    if (!b.ok()) return b.status();
    return TrainingBatch{b->inputs, torch::Tensor(), b->targets};
  }

  absl::Status ForEachValidationBatch(
      int64_t batch_size, int64_t seq_len, int64_t max_batches,
      const std::function<absl::Status(const TrainingBatch&)>& visit) const override {
    absl::StatusOr<ValidationBatchIterator> batches =
        data_.ValidationBatches(batch_size, seq_len, max_batches);
    if (!batches.ok()) return batches.status();
    if (batches->num_batches() == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(path(), ": the validation split holds no window of ", seq_len, " tokens"));
    }
    while (std::optional<TokenBatch> b = batches->Next()) {
      if (absl::Status s = visit(TrainingBatch{b->inputs, torch::Tensor(), b->targets}); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  const TokenDataset& dataset() const { return data_; }

 private:
  TokenDataset data_;
};

class ClassificationData final : public TrainingData {
 public:
  explicit ClassificationData(LabeledDataset data) : data_(std::move(data)) {}

  Task task() const override { return Task::kClassification; }
  const std::string& path() const override { return data_.path(); }
  int64_t fixed_seq_len() const override { return data_.seq_len(); }
  int64_t max_token_id() const override { return data_.header().max_token_id; }
  int64_t num_classes() const override { return data_.num_classes(); }
  int64_t BatchesPerEpoch(int64_t batch_size, int64_t) const override {
    return std::max<int64_t>(1, data_.num_train_examples() / std::max<int64_t>(1, batch_size));
  }

  absl::StatusOr<TrainingBatch> TrainBatch(uint64_t seed, uint64_t unit, int64_t batch_size,
                                           int64_t) const override {
    absl::StatusOr<LabeledBatch> b = data_.TrainBatch(seed, unit, batch_size);
    if (!b.ok()) return b.status();
    return TrainingBatch{b->input_ids, b->attention_mask, b->labels};
  }

  absl::Status ForEachValidationBatch(
      int64_t batch_size, int64_t, int64_t max_batches,
      const std::function<absl::Status(const TrainingBatch&)>& visit) const override {
    const int64_t n = std::min(data_.NumValidationBatches(batch_size), max_batches);
    if (n <= 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(path(), ": the validation split holds no example"));
    }
    for (int64_t i = 0; i < n; ++i) {
      absl::StatusOr<LabeledBatch> b = data_.ValidationBatch(i, batch_size);
      if (!b.ok()) return b.status();
      if (absl::Status s = visit(TrainingBatch{b->input_ids, b->attention_mask, b->labels});
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  const LabeledDataset& dataset() const { return data_; }

 private:
  LabeledDataset data_;
};

bool HasLabeledMagic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof(kLabeledMagic) - 1] = {};
  in.read(magic, sizeof(magic));
  return in.gcount() == sizeof(magic) &&
         std::string(magic, sizeof(magic)) == std::string(kLabeledMagic, sizeof(magic));
}

}  // namespace

const char* TaskName(Task task) {
  return task == Task::kLanguageModel ? "lm" : "classify";
}

TrainingBatch TrainingBatch::Rows(int64_t begin, int64_t end) const {
  return TrainingBatch{input_ids.slice(0, begin, end),
                       attention_mask.defined() ? attention_mask.slice(0, begin, end)
                                                : torch::Tensor(),
                       targets.slice(0, begin, end)};
}

absl::Status TrainingData::CheckFitsModel(int64_t vocab_size, int64_t classes) const {
  if (max_token_id() >= vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        path(), " holds token ids up to ", max_token_id(), ", but the model's vocabulary has ",
        vocab_size, " entries: tokenize the data with the model's tokenizer"));
  }
  if (task() == Task::kClassification && classes > 0 && classes != num_classes()) {
    return absl::InvalidArgumentError(absl::StrCat(path(), " has ", num_classes(),
                                                   " labels, but the model classifies into ",
                                                   classes, " classes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TrainingData>> OpenTrainingData(const std::string& path,
                                                               TokenFileFormat format) {
  if (format == TokenFileFormat::kSpotps && HasLabeledMagic(path)) {
    absl::StatusOr<LabeledDataset> labeled = LabeledDataset::Open(path);
    if (!labeled.ok()) return labeled.status();
    return std::unique_ptr<TrainingData>(new ClassificationData(*std::move(labeled)));
  }
  absl::StatusOr<TokenDataset> tokens = TokenDataset::Open(path, format);
  if (!tokens.ok()) return tokens.status();
  return std::unique_ptr<TrainingData>(new LanguageModelData(*std::move(tokens)));
}

const TokenDataset* AsTokenDataset(const TrainingData& data) {
  const auto* lm = dynamic_cast<const LanguageModelData*>(&data);
  return lm == nullptr ? nullptr : &lm->dataset();
}

const LabeledDataset* AsLabeledDataset(const TrainingData& data) {
  const auto* labeled = dynamic_cast<const ClassificationData*>(&data);
  return labeled == nullptr ? nullptr : &labeled->dataset();
}

}  // namespace spotps
