// PayloadRange: a view of raw wire bytes for a run of one partition's
// elements, as a push or init delivered them.
#ifndef SPOTPS_PS_STORE_PAYLOAD_RANGE_H_
#define SPOTPS_PS_STORE_PAYLOAD_RANGE_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/strings/string_view.h"

namespace spotps {

// Raw bytes for elements [offset, offset + n) of one partition, as they
// arrived; `version` is the base version for a push, unused for init.
struct PayloadRange {
  uint32_t partition_id = 0;
  uint64_t offset = 0;
  absl::string_view bytes;
  uint64_t version = 0;
  // Set by a producer that has already checked that every element of
  // `bytes` is finite and at most kMaxGradientMagnitude in magnitude
  // (PushStaging does, while the stream arrives): a push then skips that
  // pass over the payload. Any other producer leaves it false.
  bool within_gradient_bound = false;
};

// What a push stream announced in its first message: elements per
// partition id. The ranges that arrive must cover exactly these.
using AnnouncedElements = std::map<uint32_t, uint64_t>;

// Ranges by partition id, ascending, each partition's sorted by offset.
using RangesByPartition = std::map<uint32_t, std::vector<const PayloadRange*>>;
RangesByPartition GroupByPartition(const std::vector<PayloadRange>& ranges);

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_PAYLOAD_RANGE_H_
