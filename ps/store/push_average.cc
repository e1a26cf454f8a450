#include "ps/store/push_average.h"

#include <algorithm>
#include <set>

namespace spotps {

PushAverage::PushAverage(size_t num_partitions)
    : num_partitions_(num_partitions), held_(Empty()) {}

PushAverage::Batch PushAverage::Empty() const {
  Batch b;
  b.counts.assign(num_partitions_, 0);
  b.base_sum.assign(num_partitions_, 0);
  return b;
}

void PushAverage::Add(absl::string_view push_id, const std::vector<PayloadRange>& ranges,
                      RoundBuffer::Gradient copy, absl::Time now) {
  std::set<uint32_t> carried;
  for (const PayloadRange& r : ranges) {
    if (carried.insert(r.partition_id).second) {
      held_.counts[r.partition_id] += 1;
      held_.base_sum[r.partition_id] += r.version;
    }
  }
  held_.gradients.push_back(std::move(copy));
  held_.push_ids.emplace_back(push_id);
  oldest_ = std::min(oldest_, now);
}

bool PushAverage::Holds(absl::string_view push_id) const {
  return std::find(held_.push_ids.begin(), held_.push_ids.end(), push_id) != held_.push_ids.end();
}

PushAverage::Batch PushAverage::Take() {
  Batch out = std::move(held_);
  held_ = Empty();
  oldest_ = absl::InfiniteFuture();
  return out;
}

void PushAverage::Batch::MeanInto(uint32_t id, int64_t n, float* out) const {
  std::fill(out, out + n, 0.0f);
  for (const RoundBuffer::Gradient& g : gradients) RoundBuffer::AddPartitionInto(g, id, out);
  const float inverse = counts[id] > 0 ? 1.0f / static_cast<float>(counts[id]) : 0.0f;
  for (int64_t i = 0; i < n; ++i) out[i] *= inverse;
}

}  // namespace spotps
