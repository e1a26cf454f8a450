#include "trainer/model/trainable_model.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "trainer/runtime/torch_status.h"

namespace spotps {
namespace {

// The logits' shape a task promises, checked before the loss so that a
// model that breaks its contract gets a message, not a LibTorch error deep
// inside cross_entropy.
void CheckLogits(Task task, const torch::Tensor& logits, const TrainingBatch& batch) {
  const int64_t b = batch.input_ids.size(0), t = batch.input_ids.size(1);
  if (task == Task::kLanguageModel) {
    TORCH_CHECK_VALUE(logits.dim() == 3 && logits.size(0) == b && logits.size(1) == t,
                      "an lm model's forward must return logits [B, T, V] = [", b, ", ", t,
                      ", V] for input_ids [", b, ", ", t, "], got ", logits.sizes());
  } else {
    TORCH_CHECK_VALUE(logits.dim() == 2 && logits.size(0) == b,
                      "a classify model's forward must return logits [B, C] = [", b,
                      ", C], got ", logits.sizes());
  }
  TORCH_CHECK_VALUE(logits.is_floating_point(), "logits must be floating point, got ",
                    logits.scalar_type());
}

torch::Tensor Loss(Task task, const torch::Tensor& logits, const TrainingBatch& batch) {
  CheckLogits(task, logits, batch);
  if (task == Task::kLanguageModel) return NextTokenCrossEntropy(logits, batch.targets);
  return torch::cross_entropy_loss(logits.to(torch::kFloat), batch.targets);
}

}  // namespace

torch::Tensor NextTokenCrossEntropy(const torch::Tensor& logits, const torch::Tensor& targets) {
  TORCH_CHECK_VALUE(logits.dim() == 3 && targets.dim() == 2 && logits.size(0) == targets.size(0) &&
                        logits.size(1) == targets.size(1),
                    "logits ", logits.sizes(), " do not match targets ", targets.sizes());
  const int64_t vocab = logits.size(2);
  return torch::cross_entropy_loss(logits.reshape({-1, vocab}).to(torch::kFloat),
                                   targets.reshape({-1}));
}

absl::StatusOr<torch::Tensor> ComputeLoss(TrainableModel& model, const TrainingBatch& batch,
                                          ComputeDType dtype) {
  ComputePrecisionScope precision(dtype);
  return CatchTorchErrors([&] { return Loss(model.task(), model.Forward(batch), batch); });
}

absl::Status CheckModelFitsData(const TrainableModel& model, const TrainingData& data,
                                int64_t batch_size, int64_t seq_len) {
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", model.name(), " and data ", data.path(), ": ", why));
  };
  if (model.task() != data.task()) {
    return refuse(absl::StrCat(
        "the model's task is ", TaskName(model.task()), " but the data is for ",
        TaskName(data.task()),
        model.task() == Task::kLanguageModel
            ? " (a labeled-example file): give a classifier, forward(input_ids, attention_mask)"
            : " (a token file): give a labeled-example file (spotps-tokenize --labeled)"));
  }
  if (batch_size <= 0 || seq_len <= 0) {
    return refuse(absl::StrCat("batch ", batch_size, " and seq_len ", seq_len,
                               " must be positive"));
  }
  const ModelLimits limits = model.limits();
  if (limits.context_len > 0 && seq_len > limits.context_len) {
    return refuse(absl::StrCat("seq_len ", seq_len, " is longer than the model's context (",
                               limits.context_len, " tokens)"));
  }
  if (data.fixed_seq_len() > 0 && seq_len != data.fixed_seq_len()) {
    return refuse(absl::StrCat("the labeled examples have ", data.fixed_seq_len(),
                               " tokens each, not ", seq_len));
  }
  if (limits.vocab_size > 0 || limits.num_classes > 0) {
    const int64_t vocab =
        limits.vocab_size > 0 ? limits.vocab_size : std::numeric_limits<int64_t>::max();
    if (absl::Status s = data.CheckFitsModel(vocab, limits.num_classes); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("model ", model.name(), ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ProbeModel(TrainableModel& model, const TrainingData& data, int64_t seq_len,
                        ComputeDType dtype) {
  if (absl::Status s = CheckModelFitsData(model, data, 2, seq_len); !s.ok()) return s;
  absl::StatusOr<TrainingBatch> batch = data.TrainBatch(/*seed=*/0, /*unit=*/0, 2, seq_len);
  if (!batch.ok()) return batch.status();
  torch::NoGradGuard no_grad;
  const bool was_training = model.training();
  model.SetTraining(false);
  ComputePrecisionScope precision(dtype);
  absl::StatusOr<std::string> problem = CatchTorchErrors([&]() -> std::string {
    const torch::Tensor logits = model.Forward(*batch);
    CheckLogits(model.task(), logits, *batch);
    const int64_t width = logits.size(-1);
    if (model.task() == Task::kLanguageModel && width <= data.max_token_id()) {
      return absl::StrCat("its logits predict ", width, " tokens, but the data holds ids up to ",
                          data.max_token_id());
    }
    if (model.task() == Task::kClassification && width != data.num_classes()) {
      return absl::StrCat("its logits score ", width, " classes, but the data has ",
                          data.num_classes(), " labels");
    }
    if (!torch::isfinite(logits).all().item<bool>()) return "its logits hold NaN or Inf";
    const double loss = Loss(model.task(), logits, *batch).item<double>();
    if (!std::isfinite(loss)) return absl::StrCat("its loss on the first batch is ", loss);
    return "";
  });
  model.SetTraining(was_training);
  if (!problem.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model ", model.name(), " on ", data.path(),
                                                   ": ", problem.status().message()));
  }
  if (!problem->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", model.name(), " on ", data.path(), ": ", *problem));
  }
  return absl::OkStatus();
}

absl::StatusOr<Evaluation> Evaluate(TrainableModel& model, const TrainingData& data,
                                    int64_t batch_size, int64_t seq_len, int64_t max_batches,
                                    ComputeDType dtype) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.training();
  model.SetTraining(false);
  double weighted_loss = 0;
  int64_t rows = 0, correct = 0;
  absl::Status s = data.ForEachValidationBatch(
      batch_size, seq_len, max_batches, [&](const TrainingBatch& batch) -> absl::Status {
        ComputePrecisionScope precision(dtype);
        absl::StatusOr<std::pair<double, int64_t>> r = CatchTorchErrors([&] {
          const torch::Tensor logits = model.Forward(batch);
          const double loss = Loss(model.task(), logits, batch).item<double>();
          const int64_t right = model.task() == Task::kClassification
                                    ? logits.argmax(1).eq(batch.targets).sum().item<int64_t>()
                                    : 0;
          return std::make_pair(loss, right);
        });
        if (!r.ok()) return r.status();
        weighted_loss += r->first * batch.rows();
        correct += r->second;
        rows += batch.rows();
        return absl::OkStatus();
      });
  model.SetTraining(was_training);
  if (!s.ok()) return s;
  Evaluation e;
  e.rows = rows;
  e.loss = weighted_loss / std::max<int64_t>(rows, 1);
  if (model.task() == Task::kClassification) e.accuracy = double(correct) / std::max<int64_t>(rows, 1);
  return e;
}

}  // namespace spotps
