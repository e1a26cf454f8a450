#include "trainer/model/evaluation.h"

#include "trainer/runtime/torch_status.h"

namespace spotps {

absl::StatusOr<double> ValidationLoss(GptModel& model, const TokenDataset& data, int64_t batch_size,
                                      int64_t seq_len, int64_t max_batches, ComputeDType dtype) {
  absl::StatusOr<ValidationBatchIterator> batches =
      data.ValidationBatches(batch_size, seq_len, max_batches);
  if (!batches.ok()) return batches.status();
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  double weighted = 0;
  int64_t windows = 0;
  while (std::optional<TokenBatch> batch = batches->Next()) {
    absl::StatusOr<torch::Tensor> loss = ComputeLoss(model, batch->inputs, batch->targets, dtype);
    if (!loss.ok()) return loss.status();
    const int64_t n = batch->inputs.size(0);
    weighted += loss->item<double>() * n;
    windows += n;
  }
  model->train(was_training);
  if (windows == 0) return absl::FailedPreconditionError("validation split has no window");
  return weighted / windows;
}

}  // namespace spotps
