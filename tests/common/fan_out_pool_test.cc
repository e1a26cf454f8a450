#include "common/fan_out_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "absl/synchronization/barrier.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace spotps {
namespace {

TEST(FanOutPoolTest, RunsEveryIndexAtOnceAndReportsEachResult) {
  FanOutPool pool;
  // A barrier of 4 passes only if all 4 calls run at the same time.
  auto* barrier = new absl::Barrier(4);
  std::vector<absl::Status> results = pool.RunAll(4, [&](size_t i) {
    if (barrier->Block()) delete barrier;
    return i == 2 ? absl::InternalError("two") : absl::OkStatus();
  });
  ASSERT_EQ(results.size(), 4u);
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(results[2].message(), "two");
  EXPECT_EQ(pool.Run(3, [](size_t i) { return absl::NotFoundError(std::to_string(i)); }).message(),
            "0");
  EXPECT_TRUE(pool.Run(0, [](size_t) { return absl::InternalError("never"); }).ok());
}

TEST(FanOutPoolTest, KeepsItsThreadsAcrossRuns) {
  std::atomic<int> started{0};
  FanOutPool pool([&] { started.fetch_add(1); });
  for (int round = 0; round < 50; ++round) {
    ASSERT_TRUE(pool.Run(3, [](size_t) { return absl::OkStatus(); }).ok());
  }
  // Three calls at once need three threads; fifty rounds reuse them (a
  // thread that just finished may not be idle yet, so allow a few more).
  EXPECT_GE(pool.num_threads(), 3u);
  EXPECT_LE(pool.num_threads(), 6u);
  // Each thread runs the hook once when it starts; a thread started for the
  // last round may not have got there yet if the others took every call.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (started.load() < static_cast<int>(pool.num_threads()) && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(started.load(), static_cast<int>(pool.num_threads()));
}

TEST(FanOutPoolTest, NestedRunsDoNotDeadlock) {
  FanOutPool pool;
  absl::Mutex mu;
  std::set<size_t> seen;
  ASSERT_TRUE(pool.Run(3,
                       [&](size_t outer) {
                         return pool.Run(2, [&](size_t inner) {
                           absl::MutexLock lock(&mu);
                           seen.insert(outer * 10 + inner);
                           return absl::OkStatus();
                         });
                       })
                  .ok());
  EXPECT_EQ(seen, (std::set<size_t>{0, 1, 10, 11, 20, 21}));
}

TEST(FanOutPoolTest, CallsNeverRunOnTheCallersThread) {
  FanOutPool pool;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> on_caller{0};
  ASSERT_TRUE(pool.Run(4,
                       [&](size_t) {
                         if (std::this_thread::get_id() == caller) on_caller.fetch_add(1);
                         return absl::OkStatus();
                       })
                  .ok());
  EXPECT_EQ(on_caller.load(), 0);
}

}  // namespace
}  // namespace spotps
