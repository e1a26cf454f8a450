// TorchScriptModel: a model a user brings as a TorchScript file (scripted or
// traced, saved by torch 1.13's torch.jit.save), trained like the built-in
// GPT. The contract, checked when the file is loaded:
//
//   task lm:       forward(input_ids: int64 [B, T]) -> logits [B, T, V]
//   task classify: forward(input_ids, attention_mask: int64 [B, T]) -> [B, C]
//                  (mask 1 = token, 0 = padding)
//
// What is trained: named_parameters() that require grad, in the file's
// order, each once (a tied tensor under its first name); they must be FP32.
// Buffers and frozen parameters stay as the file has them. Optional int
// attributes context_len, vocab_size and num_classes are checked against
// the data and flags. tools/models/export_model.py writes such files.
#ifndef SPOTPS_TRAINER_MODEL_TORCHSCRIPT_MODEL_H_
#define SPOTPS_TRAINER_MODEL_TORCHSCRIPT_MODEL_H_

#include <torch/script.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/model/trainable_model.h"

namespace spotps {

// Owns one loaded module. Not thread-safe (a trainer computes on one
// thread).
class TorchScriptModel final : public TrainableModel {
 public:
  // InvalidArgument naming `path` and the rule it breaks: not a file, not
  // TorchScript (a torch.save pickle, a truncated archive, random bytes),
  // a forward of another signature, parameters that are not FP32, none to
  // train, attributes of the wrong type.
  static absl::StatusOr<std::unique_ptr<TorchScriptModel>> Load(const std::string& path);

  Task task() const override { return task_; }
  ModelLimits limits() const override { return limits_; }
  std::string name() const override;
  bool has_initial_values() const override { return true; }
  std::vector<std::pair<std::string, torch::Tensor>> Parameters() override { return trained_; }
  torch::Tensor Forward(const TrainingBatch& batch) override;
  void SetTraining(bool training) override { module_.train(training); }
  bool training() const override { return module_.is_training(); }

  // Replaces the trained parameters that a safetensors file holds under the
  // same name (and shape) with its values; others keep the file's. The line
  // returned says what was loaded and what was not; InvalidArgument when a
  // name matches with another shape or nothing matches (nothing changes).
  absl::StatusOr<std::string> LoadWeightsFile(const std::string& safetensors_path) override;

 private:
  TorchScriptModel(torch::jit::Module module, std::string path, Task task, ModelLimits limits,
                   std::vector<std::pair<std::string, torch::Tensor>> trained);

  torch::jit::Module module_;
  std::string path_;
  Task task_;
  ModelLimits limits_;
  std::vector<std::pair<std::string, torch::Tensor>> trained_;
};

// True if --model names a file rather than a preset: it contains a '/' or
// ends in ".pt" or ".pth".
bool IsModelFile(const std::string& model_flag);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_MODEL_TORCHSCRIPT_MODEL_H_
