#include "ps/store/push_average.h"

#include <algorithm>
#include <set>

#include "common/tensor_codec.h"

namespace spotps {

PushAverage::PushAverage(size_t num_partitions)
    : num_partitions_(num_partitions), held_(Empty()) {}

PushAverage::Batch PushAverage::Empty() const {
  Batch b;
  b.counts.assign(num_partitions_, 0);
  b.base_sum.assign(num_partitions_, 0);
  return b;
}

void PushAverage::Add(absl::string_view push_id, absl::string_view worker,
                      const std::vector<PayloadRange>& ranges, RoundBuffer::Gradient copy,
                      absl::Time now) {
  std::set<uint32_t> carried;
  for (const PayloadRange& r : ranges) {
    if (carried.insert(r.partition_id).second) {
      held_.counts[r.partition_id] += 1;
      held_.base_sum[r.partition_id] += r.version;
    }
  }
  held_.gradients.push_back(std::move(copy));
  held_.push_ids.emplace_back(push_id);
  Contribute(worker, now);
}

void PushAverage::AddStandIn(absl::string_view worker, absl::Time now) { Contribute(worker, now); }

void PushAverage::Contribute(absl::string_view worker, absl::Time now) {
  contributions_.push_back(Contribution{std::string(worker), true});
  counted_ += 1;
  oldest_ = std::min(oldest_, now);
}

bool PushAverage::Counts(absl::string_view worker) const {
  return std::any_of(contributions_.begin(), contributions_.end(),
                     [&](const Contribution& c) { return c.counts && c.worker == worker; });
}

void PushAverage::StopCounting(absl::string_view worker) {
  if (worker.empty()) return;
  for (Contribution& c : contributions_) {
    if (!c.counts || c.worker != worker) continue;
    c.counts = false;
    counted_ -= 1;
  }
}

std::vector<std::string> PushAverage::counted_workers() const {
  std::vector<std::string> named;
  for (const Contribution& c : contributions_) {
    if (c.counts && !c.worker.empty()) named.push_back(c.worker);
  }
  return named;
}

bool PushAverage::Holds(absl::string_view push_id) const {
  return std::find(held_.push_ids.begin(), held_.push_ids.end(), push_id) != held_.push_ids.end();
}

PushAverage::Batch PushAverage::Take() {
  Batch out = std::move(held_);
  held_ = Empty();
  contributions_.clear();
  counted_ = 0;
  oldest_ = absl::InfiniteFuture();
  return out;
}

std::vector<PushAverage::ElementRun> PushAverage::Batch::MeanInto(uint32_t id, int64_t n,
                                                                  float* out) const {
  std::fill(out, out + n, 0.0f);
  // How many pushes carried each element; empty while every push that
  // carried the partition carried all of it (dense trainers: no per-element
  // bookkeeping on the hot path).
  std::vector<uint32_t> carried;
  uint32_t whole = 0;  // Pushes that carried every element, before the first partial one.
  for (const RoundBuffer::Gradient& g : gradients) {
    auto pieces = g.partitions.find(id);
    if (pieces == g.partitions.end()) continue;
    RoundBuffer::AddPartitionInto(g, id, out);
    const size_t width = WireBytesPerElement(g.dtype);
    int64_t elements = 0;
    for (const RoundBuffer::Gradient::Piece& piece : pieces->second) {
      elements += static_cast<int64_t>(piece.bytes.size() / width);
    }
    if (elements == n && carried.empty()) {
      whole += 1;
      continue;
    }
    if (carried.empty()) carried.assign(n, whole);
    for (const RoundBuffer::Gradient::Piece& piece : pieces->second) {
      const int64_t end = static_cast<int64_t>(piece.offset + piece.bytes.size() / width);
      for (int64_t i = static_cast<int64_t>(piece.offset); i < end; ++i) carried[i] += 1;
    }
  }
  if (carried.empty()) {  // Only whole-partition pushes, if any.
    if (whole == 0) return {};
    const float inverse = 1.0f / static_cast<float>(whole);
    for (int64_t i = 0; i < n; ++i) out[i] *= inverse;
    return {{0, n}};
  }
  std::vector<ElementRun> runs;
  for (int64_t i = 0; i < n; ++i) {
    if (carried[i] == 0) continue;
    out[i] /= static_cast<float>(carried[i]);
    if (!runs.empty() && runs.back().end == i) {
      runs.back().end = i + 1;
    } else {
      runs.push_back({i, i + 1});
    }
  }
  return runs;
}

}  // namespace spotps
