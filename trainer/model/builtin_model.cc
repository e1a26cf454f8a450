#include "trainer/model/builtin_model.h"

#include "absl/strings/str_cat.h"
#include "trainer/model/pretrained_weights.h"

namespace spotps {

BuiltinGptModel::BuiltinGptModel(GptModel model, std::string preset)
    : model_(std::move(model)), preset_(std::move(preset)) {}

absl::StatusOr<std::unique_ptr<BuiltinGptModel>> BuiltinGptModel::Create(
    const GptConfig& config, std::optional<uint64_t> seed, std::string preset) {
  absl::StatusOr<GptModel> model =
      seed.has_value() ? CreateGptModel(config, *seed) : CreateUninitializedGptModel(config);
  if (!model.ok()) return model.status();
  return std::make_unique<BuiltinGptModel>(*std::move(model), std::move(preset));
}

ModelLimits BuiltinGptModel::limits() const {
  ModelLimits l;
  l.context_len = model_->config().context_len;
  l.vocab_size = model_->config().vocab_size;
  return l;
}

std::vector<std::pair<std::string, torch::Tensor>> BuiltinGptModel::Parameters() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : model_->named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

torch::Tensor BuiltinGptModel::Forward(const TrainingBatch& batch) {
  return model_->forward(batch.input_ids);
}

absl::StatusOr<std::string> BuiltinGptModel::LoadWeightsFile(const std::string& path) {
  if (absl::Status s = LoadPretrainedWeights(model_, path); !s.ok()) return s;
  return absl::StrCat("initial weights from ", path, " (Hugging Face GPT-2 names)");
}

}  // namespace spotps
