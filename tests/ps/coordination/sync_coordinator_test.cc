// Sync mode in the coordinator, on a fake clock: a round closes once every
// live worker gave it one gradient, departures never hold it up, and every
// unit of every epoch is committed exactly once, when its round is applied.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <thread>

#include "ps/coordination/coordinator.h"

namespace spotps {
namespace {

using Outcome = WorkUnitDispatcher::Outcome;

class SyncCoordinatorTest : public ::testing::Test {
 protected:
  std::unique_ptr<Coordinator> Make(uint32_t epochs, uint64_t units,
                                    absl::Duration wait = absl::ZeroDuration()) {
    CoordinatorOptions o;
    o.consistency = Consistency{v1::CONSISTENCY_SYNC, 0};
    o.sync_acquire_wait = wait;
    o.dispatch.num_epochs = epochs;
    o.dispatch.units_per_epoch = units;
    o.dispatch.seed = 7;
    o.dispatch.unit_lease = absl::Seconds(1);  // Ignored: sync units live with their worker.
    o.worker_lease = absl::Seconds(10);
    auto c = Coordinator::Create(o, [this] { return now_; });
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }
  // Acquires a unit and commits it under a push id made from the unit.
  WorkUnitDispatcher::Grant Train(Coordinator& c, uint64_t worker) {
    auto g = c.Acquire(worker);
    EXPECT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->outcome, Outcome::kUnit);
    EXPECT_TRUE(c.Commit(worker, g->epoch, g->index, PushId(*g)).ok());
    return *g;
  }
  static std::string PushId(const WorkUnitDispatcher::Grant& g) {
    return "push-" + std::to_string(g.epoch) + "-" + std::to_string(g.index);
  }
  void Advance(absl::Duration d) { now_ += d; }
  absl::Time now_ = absl::UnixEpoch() + absl::Hours(1000);
};

TEST_F(SyncCoordinatorTest, RoundClosesOnlyOnceEveryLiveWorkerContributed) {
  auto c = Make(1, 10);
  const uint64_t a = *c->Register("a"), b = *c->Register("b"), w = *c->Register("w");
  const auto ga = Train(*c, a);
  Train(*c, b);
  EXPECT_FALSE(c->AwaitClosedRound(absl::ZeroDuration()).has_value());  // w owes one.
  EXPECT_EQ(c->Acquire(a)->outcome, Outcome::kWait);  // One unit per worker per round.
  const auto gw = Train(*c, w);
  auto closed = c->AwaitClosedRound(absl::ZeroDuration());
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->number, 1u);
  EXPECT_EQ(closed->push_ids.size(), 3u);
  EXPECT_EQ(c->Acquire(w)->outcome, Outcome::kWait);  // Being applied.
  // Nothing counts as committed before the shards applied the round.
  EXPECT_EQ(c->Progress().epochs(0).committed(), 0u);
  EXPECT_EQ(c->Progress().sync_round_contributions(), 3u);
  c->FinishRound(closed->number, /*applied=*/true);
  const v1::ProgressResponse p = c->Progress();
  EXPECT_EQ(p.epochs(0).committed(), 3u);
  EXPECT_EQ(p.sync_round(), 2u);
  EXPECT_EQ(p.sync_rounds_applied(), 1u);
  EXPECT_EQ(p.consistency(), v1::CONSISTENCY_SYNC);
  const auto next = Train(*c, a);
  EXPECT_NE(next.index, ga.index);
  EXPECT_NE(next.index, gw.index);
}

TEST_F(SyncCoordinatorTest, ADeadWorkerLeavesTheRoundAndItsUnitIsReissued) {
  auto c = Make(1, 10);
  const uint64_t a = *c->Register("a"), dead = *c->Register("dead");
  auto held = c->Acquire(dead);
  ASSERT_EQ(held->outcome, Outcome::kUnit);
  Train(*c, a);
  EXPECT_FALSE(c->AwaitClosedRound(absl::ZeroDuration()).has_value());
  // Long past any unit lease, a live worker holding a unit is waited for.
  for (int i = 0; i < 3; ++i) {
    Advance(absl::Seconds(3));
    ASSERT_TRUE(c->Heartbeat(a).ok());
    ASSERT_TRUE(c->Heartbeat(dead).ok());
  }
  EXPECT_FALSE(c->AwaitClosedRound(absl::ZeroDuration()).has_value());
  for (int i = 0; i < 4; ++i) {  // Then `dead` stops heartbeating.
    Advance(absl::Seconds(3));
    ASSERT_TRUE(c->Heartbeat(a).ok());
  }
  auto closed = c->AwaitClosedRound(absl::ZeroDuration());
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->push_ids.size(), 1u);
  // Its late commit is refused: the round went on without that gradient.
  EXPECT_EQ(c->Commit(dead, held->epoch, held->index, "late").status().code(),
            absl::StatusCode::kAborted);
  c->FinishRound(closed->number, true);
  EXPECT_EQ(Train(*c, a).index, held->index);  // Re-issued units go first.
  const v1::ProgressResponse p = c->Progress();
  EXPECT_EQ(p.epochs(0).reissued(), 1u);
  EXPECT_EQ(p.workers_expired(), 1u);
}

TEST_F(SyncCoordinatorTest, AGradientThatLandedStaysWhenItsWorkerLeaves) {
  auto c = Make(1, 10);
  const uint64_t a = *c->Register("a"), b = *c->Register("b");
  ASSERT_EQ(c->Acquire(b)->outcome, Outcome::kUnit);
  Train(*c, a);
  EXPECT_TRUE(c->Deregister(a).ok());  // Drained after its push and commit.
  EXPECT_FALSE(c->AwaitClosedRound(absl::ZeroDuration()).has_value());  // b still owes.
  auto g = c->Acquire(b);  // A retried Acquire gets the same unit back.
  EXPECT_TRUE(c->Commit(b, g->epoch, g->index, "pb").ok());
  EXPECT_TRUE(c->Commit(b, g->epoch, g->index, "pb").ok());  // A retried commit.
  auto closed = c->AwaitClosedRound(absl::ZeroDuration());
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->push_ids.size(), 2u);
  c->FinishRound(closed->number, true);
  EXPECT_EQ(c->Progress().epochs(0).committed(), 2u);
  EXPECT_EQ(c->Progress().epochs(0).reissued(), 0u);
}

TEST_F(SyncCoordinatorTest, ANewcomerJoinsTheOpenRound) {
  auto c = Make(1, 10);
  const uint64_t a = *c->Register("a");
  ASSERT_EQ(c->Acquire(a)->outcome, Outcome::kUnit);
  const uint64_t late = *c->Register("late");
  auto g = c->Acquire(a);
  ASSERT_TRUE(c->Commit(a, g->epoch, g->index, "pa").ok());
  EXPECT_FALSE(c->AwaitClosedRound(absl::ZeroDuration()).has_value());  // `late` owes one.
  Train(*c, late);
  auto closed = c->AwaitClosedRound(absl::ZeroDuration());
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->push_ids.size(), 2u);
}

TEST_F(SyncCoordinatorTest, TheLastUnitsOfAnEpochMakeASmallerRound) {
  auto c = Make(2, 3);
  const uint64_t a = *c->Register("a"), b = *c->Register("b");
  Train(*c, a);
  Train(*c, b);
  c->FinishRound(c->AwaitClosedRound(absl::ZeroDuration())->number, true);
  Train(*c, a);                                       // The epoch's last unit.
  EXPECT_EQ(c->Acquire(b)->outcome, Outcome::kWait);  // Nothing left for b.
  auto closed = c->AwaitClosedRound(absl::ZeroDuration());
  ASSERT_TRUE(closed.has_value());  // b owes nothing: no unit was left for it.
  EXPECT_EQ(closed->push_ids.size(), 1u);
  c->FinishRound(closed->number, true);
  const auto g = Train(*c, b);
  EXPECT_EQ(g.epoch, 1u);
  EXPECT_EQ(c->Progress().current_epoch(), 1u);
}

TEST_F(SyncCoordinatorTest, AnAbandonedRoundsUnitsAreTrainedAgain) {
  auto c = Make(1, 4);
  const uint64_t a = *c->Register("a"), b = *c->Register("b");
  std::set<uint64_t> first = {Train(*c, a).index, Train(*c, b).index};
  auto closed = c->AwaitClosedRound(absl::ZeroDuration());
  c->FinishRound(closed->number, /*applied=*/false);  // A shard lost the gradients.
  v1::ProgressResponse p = c->Progress();
  EXPECT_EQ(p.epochs(0).committed(), 0u);
  EXPECT_EQ(p.epochs(0).reissued(), 2u);
  EXPECT_EQ(p.sync_rounds_abandoned(), 1u);
  std::set<uint64_t> again = {Train(*c, a).index, Train(*c, b).index};
  EXPECT_EQ(again, first);
  c->FinishRound(closed->number, true);  // Stale: that round is over.
  EXPECT_EQ(c->Progress().epochs(0).committed(), 0u);
}

TEST_F(SyncCoordinatorTest, BadCommitsChangeNothing) {
  auto c = Make(1, 4);
  const uint64_t a = *c->Register("a"), b = *c->Register("b");
  auto g = c->Acquire(a);
  EXPECT_EQ(c->Commit(a, g->epoch, g->index, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Commit(a, g->epoch, g->index, std::string(129, 'x')).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Commit(a, 0, 4, "p").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Commit(b, g->epoch, g->index, "p").status().code(),
            absl::StatusCode::kPermissionDenied);  // Not b's unit.
  EXPECT_EQ(c->Release(b, g->epoch, g->index).code(),
            absl::StatusCode::kPermissionDenied);  // Not b's to give back either.
  EXPECT_EQ(c->Progress().sync_round_contributions(), 0u);
  EXPECT_EQ(c->Progress().epochs(0).reissued(), 0u);
  // A drained worker gives its unit back and may take one again.
  EXPECT_TRUE(c->Release(a, g->epoch, g->index).ok());
  EXPECT_EQ(c->Acquire(a)->index, g->index);
}

TEST_F(SyncCoordinatorTest, RollbackAbandonsTheOpenRound) {
  auto c = Make(1, 6);
  const uint64_t a = *c->Register("a");
  const std::string saved = c->ExportProgress();
  Train(*c, a);
  auto closed = c->AwaitClosedRound(absl::ZeroDuration());
  ASSERT_TRUE(closed.has_value());
  ASSERT_TRUE(c->ImportProgress(saved).ok());
  c->FinishRound(closed->number, true);  // Applied, but the progress went back: ignored.
  const v1::ProgressResponse p = c->Progress();
  EXPECT_EQ(p.epochs(0).committed(), 0u);
  EXPECT_EQ(p.sync_rounds_abandoned(), 1u);
  EXPECT_EQ(c->Acquire(a)->outcome, Outcome::kUnit);
}

TEST_F(SyncCoordinatorTest, AWaitingAcquireReturnsAsSoonAsTheNextRoundOpens) {
  auto c = Make(1, 10, /*wait=*/absl::Seconds(20));
  const uint64_t a = *c->Register("a");
  Train(*c, a);
  auto closed = c->AwaitClosedRound(absl::ZeroDuration());
  ASSERT_TRUE(closed.has_value());
  std::thread applier([&] {
    absl::SleepFor(absl::Milliseconds(200));
    c->FinishRound(closed->number, true);
  });
  const absl::Time start = absl::Now();
  auto g = c->Acquire(a);  // Long poll: waits for the round, not 20 s.
  const absl::Duration waited = absl::Now() - start;
  applier.join();
  EXPECT_EQ(g->outcome, Outcome::kUnit);
  EXPECT_GE(waited, absl::Milliseconds(150));
  EXPECT_LT(waited, absl::Seconds(10));
}

// Random schedules of trains, deaths, drains and joins: every round takes at
// most one gradient per worker, no schedule deadlocks, and every unit of
// every epoch is committed exactly once.
TEST_F(SyncCoordinatorTest, RandomMembershipChurnLosesAndDoublesNothing) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    auto c = Make(3, 17);
    std::vector<uint64_t> workers = {*c->Register("w0"), *c->Register("w1"), *c->Register("w2")};
    std::multiset<std::pair<uint32_t, uint64_t>> applied;  // (epoch, index) of applied units.
    std::map<uint64_t, WorkUnitDispatcher::Grant> held;    // By worker.
    std::map<std::string, std::pair<uint32_t, uint64_t>> pushes;
    int steps = 0;
    while (!c->Progress().done()) {
      ASSERT_LT(++steps, 20000) << "seed " << seed << ": no progress (deadlock?)";
      const int action = static_cast<int>(rng() % 100);
      if (action < 3 && workers.size() > 1) {  // kill -9: never heard from again.
        const size_t i = rng() % workers.size();
        held.erase(workers[i]);
        workers.erase(workers.begin() + static_cast<long>(i));
      } else if (action < 5) {  // A worker joins.
        workers.push_back(*c->Register("joiner"));
      } else if (action < 7 && workers.size() > 1) {  // A drain: give back, leave.
        const size_t i = rng() % workers.size();
        if (auto it = held.find(workers[i]); it != held.end()) {
          c->Release(workers[i], it->second.epoch, it->second.index).IgnoreError();
          held.erase(it);
        }
        c->Deregister(workers[i]).IgnoreError();
        workers.erase(workers.begin() + static_cast<long>(i));
      } else {
        const uint64_t w = workers[rng() % workers.size()];
        if (auto it = held.find(w); it != held.end()) {
          const std::string id = "p" + std::to_string(steps);
          pushes[id] = {it->second.epoch, it->second.index};
          ASSERT_TRUE(c->Commit(w, it->second.epoch, it->second.index, id).ok());
          held.erase(it);
        } else {
          auto g = c->Acquire(w);
          ASSERT_TRUE(g.ok()) << g.status();
          if (g->outcome == Outcome::kUnit) held[w] = *g;
        }
      }
      Advance(absl::Milliseconds(100));  // The dead expire after 100 steps.
      for (uint64_t w : workers) ASSERT_TRUE(c->Heartbeat(w).ok());
      if (auto closed = c->AwaitClosedRound(absl::ZeroDuration())) {
        std::set<std::string> ids(closed->push_ids.begin(), closed->push_ids.end());
        ASSERT_EQ(ids.size(), closed->push_ids.size());
        for (const std::string& id : ids) applied.insert(pushes.at(id));
        c->FinishRound(closed->number, true);
      }
    }
    ASSERT_EQ(applied.size(), 3u * 17u) << "seed " << seed;
    const std::set<std::pair<uint32_t, uint64_t>> distinct(applied.begin(), applied.end());
    EXPECT_EQ(distinct.size(), applied.size()) << "seed " << seed << ": a unit applied twice";
    const v1::ProgressResponse p = c->Progress();
    for (const auto& e : p.epochs()) {
      EXPECT_EQ(e.committed(), 17u);
      EXPECT_EQ(e.duplicated(), 0u);
    }
  }
}

}  // namespace
}  // namespace spotps
