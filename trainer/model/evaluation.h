// Validation loss of a model's current weights on a dataset's held-out split.
#ifndef SPOTPS_TRAINER_MODEL_EVALUATION_H_
#define SPOTPS_TRAINER_MODEL_EVALUATION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "trainer/data/token_dataset.h"
#include "trainer/model/gpt_model.h"
#include "trainer/runtime/compute_precision.h"

namespace spotps {

// Mean next-token cross-entropy over the dataset's fixed validation windows
// (at most max_batches batches), without autograd. The same arguments give
// the same windows, so values from different processes compare.
absl::StatusOr<double> ValidationLoss(GptModel& model, const TokenDataset& data, int64_t batch_size,
                                      int64_t seq_len, int64_t max_batches, ComputeDType dtype);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_MODEL_EVALUATION_H_
