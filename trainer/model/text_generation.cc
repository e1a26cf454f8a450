#include "trainer/model/text_generation.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "trainer/runtime/torch_status.h"

namespace spotps {
namespace {

absl::Status ValidateRequest(TrainableModel& model, absl::Span<const int64_t> prompt,
                             const GenerationOptions& options) {
  if (model.task() != Task::kLanguageModel) {
    return absl::InvalidArgumentError(
        absl::StrCat(model.name(), " is a classifier (task classify): it does not generate text"));
  }
  if (prompt.empty()) {
    return absl::InvalidArgumentError("Generate needs a non-empty prompt");
  }
  const int64_t vocab = model.limits().vocab_size;
  for (int64_t token : prompt) {
    if (token < 0 || (vocab > 0 && token >= vocab)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt token ", token, " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  if (options.max_new_tokens < 0 || options.top_k < 0) {
    return absl::InvalidArgumentError("max_new_tokens and top_k must not be negative");
  }
  return absl::OkStatus();
}

// logits: FP32 [vocab] for the next position.
int64_t PickToken(torch::Tensor logits, const GenerationOptions& options,
                  at::Generator& generator) {
  if (options.temperature <= 0.0) return logits.argmax().item<int64_t>();
  logits = logits / options.temperature;
  if (options.top_k > 0 && options.top_k < logits.size(0)) {
    const torch::Tensor kth_largest = std::get<0>(logits.topk(options.top_k)).min();
    logits = logits.masked_fill(logits < kth_largest, -std::numeric_limits<float>::infinity());
  }
  const torch::Tensor probs = torch::softmax(logits, /*dim=*/0);
  return torch::multinomial(probs, /*num_samples=*/1, /*replacement=*/false, generator)
      .item<int64_t>();
}

// Puts a model in eval mode for the object's lifetime.
class EvalModeScope {
 public:
  explicit EvalModeScope(TrainableModel& model) : model_(model), was_training_(model.training()) {
    model_.SetTraining(false);
  }
  ~EvalModeScope() { model_.SetTraining(was_training_); }

 private:
  TrainableModel& model_;
  bool was_training_;
};

std::vector<int64_t> SampleContinuation(TrainableModel& model, absl::Span<const int64_t> prompt,
                                        const GenerationOptions& options) {
  torch::NoGradGuard no_grad;
  EvalModeScope eval_mode(model);
  ComputePrecisionScope precision(options.dtype);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);

  std::vector<int64_t> sequence(prompt.begin(), prompt.end());
  // A model that states no context length gets the whole sequence.
  const int64_t context = model.limits().context_len > 0 ? model.limits().context_len
                                                         : std::numeric_limits<int64_t>::max();
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    const int64_t length = std::min<int64_t>(context, static_cast<int64_t>(sequence.size()));
    const torch::Tensor window =
        torch::tensor(std::vector<int64_t>(sequence.end() - length, sequence.end()))
            .view({1, length});
    TrainingBatch batch;
    batch.input_ids = window;
    torch::Tensor last_logits = model.Forward(batch)[0][length - 1].to(torch::kFloat);
    sequence.push_back(PickToken(last_logits, options, generator));
  }
  return std::vector<int64_t>(sequence.begin() + prompt.size(), sequence.end());
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> Generate(TrainableModel& model,
                                              absl::Span<const int64_t> prompt,
                                              const GenerationOptions& options) {
  if (absl::Status status = ValidateRequest(model, prompt, options); !status.ok()) {
    return status;
  }
  return CatchTorchErrors([&] { return SampleContinuation(model, prompt, options); });
}

}  // namespace spotps
