#include "ps/store/payload_range.h"

#include <algorithm>

namespace spotps {

RangesByPartition GroupByPartition(const std::vector<PayloadRange>& ranges) {
  RangesByPartition groups;
  for (const PayloadRange& r : ranges) groups[r.partition_id].push_back(&r);
  for (auto& [id, group] : groups) {
    std::sort(group.begin(), group.end(),
              [](const PayloadRange* a, const PayloadRange* b) { return a->offset < b->offset; });
  }
  return groups;
}

}  // namespace spotps
