#include "ps/store/push_average.h"

#include <algorithm>
#include <set>

#include "common/tensor_codec.h"

namespace spotps {

PushAverage::PushAverage(std::vector<int64_t> partition_sizes)
    : sizes_(std::move(partition_sizes)) {
  held_.sums.resize(sizes_.size());
  held_.counts.assign(sizes_.size(), 0);
  held_.base_sum.assign(sizes_.size(), 0);
}

void PushAverage::Add(absl::string_view push_id, v1::DType dtype,
                      const std::vector<PayloadRange>& ranges, absl::Time now) {
  const size_t width = WireBytesPerElement(dtype);
  std::set<uint32_t> carried;
  std::vector<float> decoded;
  for (const PayloadRange& r : ranges) {
    std::vector<float>& sum = held_.sums[r.partition_id];
    // Allocated on first use, so a Take costs nothing for idle partitions.
    if (sum.empty()) sum.assign(sizes_[r.partition_id], 0.0f);
    const int64_t n = static_cast<int64_t>(r.bytes.size() / width);
    decoded.resize(n);
    DecodeToFp32(dtype, r.bytes, n, decoded.data()).IgnoreError();  // Validated.
    float* dst = sum.data() + r.offset;
    for (int64_t i = 0; i < n; ++i) dst[i] += decoded[i];
    if (carried.insert(r.partition_id).second) {
      held_.counts[r.partition_id] += 1;
      held_.base_sum[r.partition_id] += r.version;
    }
  }
  held_.push_ids.emplace_back(push_id);
  oldest_ = std::min(oldest_, now);
}

bool PushAverage::Holds(absl::string_view push_id) const {
  return std::find(held_.push_ids.begin(), held_.push_ids.end(), push_id) != held_.push_ids.end();
}

PushAverage::Batch PushAverage::Take() {
  Batch out = std::move(held_);
  held_ = Batch();
  held_.sums.resize(sizes_.size());
  held_.counts.assign(sizes_.size(), 0);
  held_.base_sum.assign(sizes_.size(), 0);
  oldest_ = absl::InfiniteFuture();
  return out;
}

}  // namespace spotps
