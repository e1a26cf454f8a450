#include "trainer/elastic/int8_error_feedback.h"

#include <algorithm>
#include <cmath>

#include "common/int8_blocks.h"

namespace spotps {

Int8ErrorFeedback::Int8ErrorFeedback(const PartitionMap& map) : map_(map) {
  int64_t total = 0, largest = 0;
  for (const Partition& p : map.partitions()) {
    total += p.num_elements;
    largest = std::max(largest, p.num_elements);
  }
  residual_.assign(static_cast<size_t>(total), 0.0f);
  carried_.resize(static_cast<size_t>(largest));
}

void Int8ErrorFeedback::Compensate(absl::Span<float> gradient) {
  for (const Partition& p : map_.partitions()) {
    float* g = gradient.data() + p.flat_begin;
    float* r = residual_.data() + p.flat_begin;
    for (int64_t i = 0; i < p.num_elements; ++i) g[i] += r[i];
    RoundTripInt8Blocks(g, 0, p.num_elements, carried_.data());
    for (int64_t i = 0; i < p.num_elements; ++i) r[i] = g[i] - carried_[i];
  }
}

double Int8ErrorFeedback::ResidualNorm() const {
  double squares = 0;
  for (float r : residual_) squares += static_cast<double>(r) * r;
  return std::sqrt(squares);
}

}  // namespace spotps
