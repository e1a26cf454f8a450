// Benchmarks' list flags ("1,2,4,8"): comma-separated positive counts.
#ifndef SPOTPS_TESTS_SUPPORT_COUNT_LIST_H_
#define SPOTPS_TESTS_SUPPORT_COUNT_LIST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace spotps::testing {

// The counts of `list`, in order; INVALID_ARGUMENT naming the first entry
// that is not a positive integer (an empty entry included).
inline absl::StatusOr<std::vector<int64_t>> ParseCountList(absl::string_view list) {
  std::vector<int64_t> counts;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(item, &n) || n <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad count '", item, "' in '", list, "'"));
    }
    counts.push_back(n);
  }
  return counts;
}

}  // namespace spotps::testing

#endif  // SPOTPS_TESTS_SUPPORT_COUNT_LIST_H_
