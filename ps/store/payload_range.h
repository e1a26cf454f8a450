// PayloadRange: a view of raw wire bytes for a run of one partition's
// elements, as a push or init delivered them.
#ifndef SPOTPS_PS_STORE_PAYLOAD_RANGE_H_
#define SPOTPS_PS_STORE_PAYLOAD_RANGE_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace spotps {

// Raw bytes for elements [offset, offset + n) of one partition, as they
// arrived; `version` is the base version for a push, unused for init.
struct PayloadRange {
  uint32_t partition_id = 0;
  uint64_t offset = 0;
  absl::string_view bytes;
  uint64_t version = 0;
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_PAYLOAD_RANGE_H_
