#include "ps/store/partition_lanes.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace spotps {
namespace {

TEST(PartitionLanesTest, CallsEveryIndexOnceOnALaneItNames) {
  PartitionLanes lanes(4);
  ASSERT_EQ(lanes.lanes(), 4u);
  constexpr size_t kN = 1000;
  std::vector<std::atomic<int>> calls(kN);
  std::atomic<bool> bad_lane{false};
  lanes.ForEach(kN, [&](size_t i, size_t lane) {
    calls[i].fetch_add(1);
    if (lane >= 4) bad_lane = true;
  });
  for (size_t i = 0; i < kN; ++i) ASSERT_EQ(calls[i].load(), 1) << i;
  EXPECT_FALSE(bad_lane.load());
}

// Each call waits for the other to have started: only lanes that run side
// by side let both finish.
TEST(PartitionLanesTest, LanesRunSideBySide) {
  PartitionLanes lanes(2);
  absl::Mutex mu;
  int entered = 0;
  bool both = true;
  lanes.ForEach(2, [&](size_t, size_t) {
    absl::MutexLock lock(&mu);
    entered += 1;
    auto other_entered = [&entered]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return entered == 2; };
    both = both && mu.AwaitWithTimeout(absl::Condition(&other_entered), absl::Seconds(10));
  });
  EXPECT_TRUE(both);
}

// While one update holds the lanes, another runs on its own caller, in
// order, as lane 0.
TEST(PartitionLanesTest, ACallWhileTheLanesAreHeldRunsOnItsCaller) {
  PartitionLanes lanes(2);
  std::vector<size_t> order;
  std::vector<size_t> lanes_seen;
  std::thread::id ran_on, caller;
  lanes.ForEach(2, [&](size_t i, size_t) {
    if (i != 0) return;
    std::thread second([&] {
      caller = std::this_thread::get_id();
      lanes.ForEach(3, [&](size_t j, size_t lane) {
        order.push_back(j);
        lanes_seen.push_back(lane);
        ran_on = std::this_thread::get_id();
      });
    });
    second.join();
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(lanes_seen, (std::vector<size_t>{0, 0, 0}));
  EXPECT_EQ(ran_on, caller);
  // Released afterwards: the next call gets the lanes again.
  std::atomic<int> calls{0};
  lanes.ForEach(64, [&](size_t, size_t) { calls++; });
  EXPECT_EQ(calls.load(), 64);
}

TEST(PartitionLanesTest, OneLaneRunsInOrderOnTheCaller) {
  PartitionLanes lanes(1);
  std::vector<size_t> order;
  const std::thread::id caller = std::this_thread::get_id();
  bool on_caller = true;
  lanes.ForEach(5, [&](size_t i, size_t lane) {
    order.push_back(i);
    on_caller = on_caller && lane == 0 && std::this_thread::get_id() == caller;
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(on_caller);
}

TEST(PartitionLanesTest, ZeroMeansOnePerCoreAtMostEight) {
  PartitionLanes lanes(0);
  EXPECT_GE(lanes.lanes(), 1u);
  EXPECT_LE(lanes.lanes(), 8u);
  EXPECT_LE(lanes.lanes(), std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace spotps
