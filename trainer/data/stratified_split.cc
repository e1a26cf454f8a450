#include "trainer/data/stratified_split.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "trainer/data/sample_hash.h"

namespace spotps {
namespace {

// How many of each label's examples to hold out (see the header).
std::vector<int64_t> HeldOutCounts(const std::vector<int64_t>& label_counts, int64_t total,
                                   double val_fraction) {
  const int64_t held_out_total = std::llround(val_fraction * static_cast<double>(total));
  const size_t num_labels = label_counts.size();
  std::vector<int64_t> held_out(num_labels, 0);
  if (total == 0) return held_out;
  std::vector<double> remainders(num_labels);
  int64_t assigned = 0;
  for (size_t l = 0; l < num_labels; ++l) {
    const double share = static_cast<double>(label_counts[l]) * held_out_total / total;
    held_out[l] = static_cast<int64_t>(std::floor(share));
    remainders[l] = share - held_out[l];
    assigned += held_out[l];
  }
  std::vector<size_t> order(num_labels);
  std::iota(order.begin(), order.end(), 0);
  // Largest remainders first; ties to the smaller label id, for determinism.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return remainders[a] > remainders[b]; });
  for (size_t k = 0; k < num_labels && assigned < held_out_total; ++k, ++assigned) {
    ++held_out[order[k]];
  }
  for (size_t l = 0; l < num_labels; ++l) {
    held_out[l] = std::min(held_out[l], std::max<int64_t>(label_counts[l] - 1, 0));
  }
  return held_out;
}

}  // namespace

std::vector<bool> StratifiedValidationSplit(absl::Span<const int32_t> labels, int32_t num_labels,
                                            double val_fraction, uint64_t seed) {
  std::vector<std::vector<int64_t>> examples_of(num_labels);
  for (size_t i = 0; i < labels.size(); ++i) examples_of[labels[i]].push_back(i);
  std::vector<int64_t> label_counts(num_labels);
  for (int32_t l = 0; l < num_labels; ++l) label_counts[l] = examples_of[l].size();
  const std::vector<int64_t> held_out =
      HeldOutCounts(label_counts, static_cast<int64_t>(labels.size()), val_fraction);

  std::vector<bool> is_validation(labels.size(), false);
  for (int32_t l = 0; l < num_labels; ++l) {
    std::vector<int64_t>& examples = examples_of[l];
    const auto order_key = [seed](int64_t i) { return Mix64(Mix64(seed) ^ static_cast<uint64_t>(i)); };
    std::sort(examples.begin(), examples.end(),
              [&](int64_t a, int64_t b) { return order_key(a) < order_key(b); });
    for (int64_t k = 0; k < held_out[l]; ++k) is_validation[examples[k]] = true;
  }
  return is_validation;
}

}  // namespace spotps
