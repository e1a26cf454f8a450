#include "common/background_loop.h"

#include <gtest/gtest.h>

#include <atomic>

#include "absl/time/clock.h"

namespace spotps {
namespace {

TEST(BackgroundLoopTest, TicksUntilStoppedAndNotAfter) {
  std::atomic<int> ticks{0};
  BackgroundLoop loop(absl::Milliseconds(1), [&] { ticks.fetch_add(1); });
  loop.Start();
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (ticks.load() < 5 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  loop.Stop();
  const int at_stop = ticks.load();
  EXPECT_GE(at_stop, 5);
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(ticks.load(), at_stop);
  loop.Stop();  // Idempotent.
}

TEST(BackgroundLoopTest, StopWakesALongWaitAtOnce) {
  std::atomic<int> ticks{0};
  BackgroundLoop loop(absl::Hours(1), [&] { ticks.fetch_add(1); });
  loop.Start();
  const absl::Time start = absl::Now();
  loop.Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(ticks.load(), 0);
}

TEST(BackgroundLoopTest, DestructorStopsAndAnUnstartedLoopIsFine) {
  std::atomic<int> ticks{0};
  {
    BackgroundLoop loop(absl::ZeroDuration(), [&] {
      ticks.fetch_add(1);
      absl::SleepFor(absl::Milliseconds(1));
    });
    loop.Start();
    while (ticks.load() == 0) absl::SleepFor(absl::Milliseconds(1));
  }
  const int after = ticks.load();
  absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(ticks.load(), after);
  BackgroundLoop never_started(absl::Seconds(1), [] {});
}

}  // namespace
}  // namespace spotps
