// A validation split that keeps each label's share: the held-out examples
// of every label are as close to its share of the whole as whole examples
// allow, and every label keeps at least one example for training.

#ifndef SPOTPS_TRAINER_DATA_STRATIFIED_SPLIT_H_
#define SPOTPS_TRAINER_DATA_STRATIFIED_SPLIT_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace spotps {

// For examples with dense labels in [0, num_labels), which are held out:
// round(val_fraction * N) examples in all, shared among the labels by
// largest remainder so that each label's count is within one example of
// its share (n_label / N of the total), but never all of a label's
// examples (so a label with one example always trains). Within a label,
// the held-out examples are a pseudo-random choice fixed by `seed`.
std::vector<bool> StratifiedValidationSplit(absl::Span<const int32_t> labels, int32_t num_labels,
                                            double val_fraction, uint64_t seed);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_STRATIFIED_SPLIT_H_
