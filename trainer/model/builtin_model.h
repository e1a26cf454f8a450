// BuiltinGptModel: spotps's own GPT (gpt_model.h, presets tiny, small and
// gpt2-124m) as a TrainableModel.
#ifndef SPOTPS_TRAINER_MODEL_BUILTIN_MODEL_H_
#define SPOTPS_TRAINER_MODEL_BUILTIN_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "trainer/model/gpt_model.h"
#include "trainer/model/trainable_model.h"

namespace spotps {

// Owns (shares) one GptModel. Its task is lm; its parameters are the GPT's
// named_parameters() (the tied head once, as wte.weight).
class BuiltinGptModel final : public TrainableModel {
 public:
  BuiltinGptModel(GptModel model, std::string preset);

  // The preset (and overrides) in `config`, drawn from `seed`, or all zeros
  // to be overwritten when `seed` is empty (a joining worker).
  static absl::StatusOr<std::unique_ptr<BuiltinGptModel>> Create(const GptConfig& config,
                                                                 std::optional<uint64_t> seed,
                                                                 std::string preset);

  Task task() const override { return Task::kLanguageModel; }
  ModelLimits limits() const override;
  std::string name() const override { return preset_; }
  bool has_initial_values() const override { return model_->initialized(); }
  std::vector<std::pair<std::string, torch::Tensor>> Parameters() override;
  torch::Tensor Forward(const TrainingBatch& batch) override;
  void SetTraining(bool training) override { model_->train(training); }
  bool training() const override { return model_->is_training(); }

  absl::StatusOr<std::string> LoadWeightsFile(const std::string& path) override;

  GptModel& gpt() { return model_; }

 private:
  GptModel model_;
  std::string preset_;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_MODEL_BUILTIN_MODEL_H_
