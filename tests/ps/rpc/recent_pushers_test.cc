// RecentPushers: the count of clients that pushed within a window, with
// bounded memory against a client that invents names.
#include "ps/rpc/recent_pushers.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace spotps {
namespace {

TEST(RecentPushersTest, CountsDistinctClientsWithinTheWindow) {
  RecentPushers pushers;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  pushers.Record("a", t0);
  pushers.Record("b", t0 + absl::Seconds(1));
  pushers.Record("a", t0 + absl::Seconds(2));  // Same client again.
  pushers.Record("", t0 + absl::Seconds(2));   // Unnamed: not counted.
  EXPECT_EQ(pushers.Count(t0 + absl::Seconds(3), absl::Seconds(10)), 2);
  // b's last push falls out of the window first; a's later one keeps it.
  EXPECT_EQ(pushers.Count(t0 + absl::Seconds(11.5), absl::Seconds(10)), 1);
  EXPECT_EQ(pushers.Count(t0 + absl::Seconds(13), absl::Seconds(10)), 0);
  // A forgotten client counts again once it pushes.
  pushers.Record("b", t0 + absl::Seconds(14));
  EXPECT_EQ(pushers.Count(t0 + absl::Seconds(14), absl::Seconds(10)), 1);
}

TEST(RecentPushersTest, KeepsAtMostItsLimitDroppingTheLongestSilent) {
  RecentPushers pushers(/*max_clients=*/3);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 100; ++i) pushers.Record(absl::StrCat("made-up-", i), t0 + absl::Seconds(i));
  EXPECT_EQ(pushers.Count(t0 + absl::Seconds(100), absl::Hours(1)), 3);
  // The three kept are the latest: only 97..99 pushed in the last 3.5 s.
  EXPECT_EQ(pushers.Count(t0 + absl::Seconds(100), absl::Seconds(3.5)), 3);
}

}  // namespace
}  // namespace spotps
