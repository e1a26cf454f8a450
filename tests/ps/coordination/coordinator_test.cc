// Membership and work-unit dispatch on a fake clock: every unit trained
// exactly once per epoch unless a lease expired, and the counts add up.
#include "ps/coordination/coordinator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <set>

namespace spotps {
namespace {

class CoordinatorTest : public ::testing::Test {
 protected:
  std::unique_ptr<Coordinator> Make(uint32_t epochs, uint64_t units, Consistency consistency = {},
                                    size_t min_workers = 0,
                                    absl::Duration acquire_wait = absl::ZeroDuration()) {
    CoordinatorOptions o;
    o.consistency = consistency;
    o.sync_acquire_wait = acquire_wait;
    o.min_workers = min_workers;
    o.dispatch.num_epochs = epochs;
    o.dispatch.units_per_epoch = units;
    o.dispatch.seed = 42;
    o.dispatch.unit_lease = absl::Seconds(30);
    o.worker_lease = absl::Seconds(10);
    auto c = Coordinator::Create(o, [this] { return now_; });
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }
  void Advance(absl::Duration d) { now_ += d; }
  absl::Time now_ = absl::UnixEpoch() + absl::Hours(1000);
};

TEST_F(CoordinatorTest, EveryUnitOfEveryEpochIsHandedOutOnce) {
  auto c = Make(3, 50);
  const uint64_t a = *c->Register("a"), b = *c->Register("b");
  std::vector<std::multiset<uint64_t>> trained(3);
  for (int turn = 0;; ++turn) {
    const uint64_t worker = turn % 2 == 0 ? a : b;
    auto grant = c->Acquire(worker);
    ASSERT_TRUE(grant.ok());
    if (grant->outcome == WorkUnitDispatcher::Outcome::kDone) break;
    ASSERT_EQ(grant->outcome, WorkUnitDispatcher::Outcome::kUnit);
    trained[grant->epoch].insert(grant->data_unit);
    auto dup = c->Commit(worker, grant->epoch, grant->index);
    ASSERT_TRUE(dup.ok());
    EXPECT_FALSE(*dup);
  }
  for (uint32_t e = 0; e < 3; ++e) {
    ASSERT_EQ(trained[e].size(), 50u);
    EXPECT_EQ(std::set<uint64_t>(trained[e].begin(), trained[e].end()).size(), 50u);
  }
  const v1::ProgressResponse p = c->Progress();
  EXPECT_TRUE(p.done());
  for (const auto& ep : p.epochs()) {
    EXPECT_EQ(ep.committed(), 50u);
    EXPECT_EQ(ep.reissued(), 0u);
    EXPECT_EQ(ep.duplicated(), 0u);
  }
}

TEST_F(CoordinatorTest, EpochOrderIsSeededShuffledAndDiffersPerEpoch) {
  const auto e0 = WorkUnitDispatcher::EpochOrder(42, 0, 100);
  const auto e1 = WorkUnitDispatcher::EpochOrder(42, 1, 100);
  EXPECT_EQ(e0, WorkUnitDispatcher::EpochOrder(42, 0, 100));
  EXPECT_NE(e0, e1);
  std::vector<uint64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < 100; ++i) ASSERT_EQ(sorted[i], i);
  std::vector<uint64_t> identity(100);
  for (uint64_t i = 0; i < 100; ++i) identity[i] = i;
  EXPECT_NE(e0, identity);
}

TEST_F(CoordinatorTest, ExpiredUnitLeaseIsReissuedAndLateCommitIsADuplicate) {
  auto c = Make(1, 3);
  const uint64_t slow = *c->Register("slow"), fast = *c->Register("fast");
  auto held = c->Acquire(slow);
  ASSERT_EQ(held->outcome, WorkUnitDispatcher::Outcome::kUnit);
  for (int i = 0; i < 7; ++i) {  // The unit lease (30 s) runs out; both stay alive.
    Advance(absl::Seconds(5));
    ASSERT_TRUE(c->Heartbeat(slow).ok());
    ASSERT_TRUE(c->Heartbeat(fast).ok());
  }
  auto again = c->Acquire(fast);
  ASSERT_EQ(again->outcome, WorkUnitDispatcher::Outcome::kUnit);
  EXPECT_EQ(again->index, held->index);  // Re-issued units go first.
  EXPECT_FALSE(*c->Commit(fast, again->epoch, again->index));
  EXPECT_TRUE(*c->Commit(slow, held->epoch, held->index));  // Trained twice: counted.
  const v1::ProgressResponse p = c->Progress();
  EXPECT_EQ(p.epochs(0).reissued(), 1u);
  EXPECT_EQ(p.epochs(0).duplicated(), 1u);
  EXPECT_EQ(p.epochs(0).committed(), 1u);
}

// Every lease of a unit carries the same push key, so a re-issue's push is
// a duplicate where the first lessee's landed; another unit, epoch or job
// never shares it.
TEST_F(CoordinatorTest, AReissuedUnitKeepsItsPushKeyAndNoOtherUnitSharesIt) {
  auto c = Make(2, 3);
  const uint64_t dead = *c->Register("dead"), alive = *c->Register("alive");
  auto first = c->Acquire(dead);
  ASSERT_EQ(first->outcome, WorkUnitDispatcher::Outcome::kUnit);
  ASSERT_FALSE(first->push_key.empty());
  for (int i = 0; i < 3; ++i) {  // The dead worker's lease (10 s) runs out.
    Advance(absl::Seconds(5));
    ASSERT_TRUE(c->Heartbeat(alive).ok());
  }
  std::set<std::string> keys;
  for (;;) {
    auto g = c->Acquire(alive);
    ASSERT_TRUE(g.ok());
    if (g->outcome == WorkUnitDispatcher::Outcome::kDone) break;
    ASSERT_EQ(g->outcome, WorkUnitDispatcher::Outcome::kUnit);
    if (g->epoch == first->epoch && g->index == first->index) {
      EXPECT_EQ(g->push_key, first->push_key);
    }
    EXPECT_TRUE(keys.insert(g->push_key).second) << g->push_key;
    ASSERT_TRUE(c->Commit(alive, g->epoch, g->index).ok());
  }
  EXPECT_EQ(keys.size(), 6u);
  EXPECT_TRUE(keys.count(first->push_key));
  auto other_job = Make(2, 3);
  auto theirs = other_job->Acquire(*other_job->Register("w"));
  EXPECT_FALSE(keys.count(theirs->push_key)) << "two jobs share push key " << theirs->push_key;
}

TEST_F(CoordinatorTest, PushKeysSurviveARollbackAndAreEmptyInSyncMode) {
  auto c = Make(1, 4);
  const uint64_t w = *c->Register("w");
  const std::string saved = c->ExportProgress();
  auto before = c->Acquire(w);
  auto restored = Make(1, 4);
  ASSERT_TRUE(restored->ImportProgress(saved).ok());
  auto after = restored->Acquire(*restored->Register("v"));
  ASSERT_EQ(after->index, before->index);
  EXPECT_EQ(after->push_key, before->push_key);
  // A record from before job ids: accepted, and the keys stay this job's.
  std::string old_record = saved;
  const uint32_t old_magic = 0x53505750;
  old_record.replace(0, 12, reinterpret_cast<const char*>(&old_magic), sizeof(old_magic));
  auto upgraded = Make(1, 4);
  ASSERT_TRUE(upgraded->ImportProgress(old_record).ok());
  auto upgraded_grant = upgraded->Acquire(*upgraded->Register("u"));
  EXPECT_EQ(upgraded_grant->index, before->index);
  EXPECT_NE(upgraded_grant->push_key, before->push_key);
  Consistency sync;
  sync.mode = v1::CONSISTENCY_SYNC;
  auto s = Make(1, 4, sync);
  auto g = s->Acquire(*s->Register("w"));
  ASSERT_EQ(g->outcome, WorkUnitDispatcher::Outcome::kUnit);
  EXPECT_TRUE(g->push_key.empty());
}

TEST_F(CoordinatorTest, DeadWorkersLoseTheirLeaseAndTheirUnits) {
  auto c = Make(1, 4);
  const uint64_t dead = *c->Register("dead"), alive = *c->Register("alive");
  auto a = c->Acquire(dead);
  auto b = c->Acquire(dead);
  ASSERT_EQ(b->outcome, WorkUnitDispatcher::Outcome::kUnit);
  for (int i = 0; i < 3; ++i) {
    Advance(absl::Seconds(5));
    ASSERT_TRUE(c->Heartbeat(alive).ok());
  }
  // 15 s without a heartbeat: `dead` is gone and must register again.
  EXPECT_EQ(c->Heartbeat(dead).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c->Acquire(dead).status().code(), absl::StatusCode::kNotFound);
  std::set<uint64_t> got;
  for (int i = 0; i < 4; ++i) {
    auto g = c->Acquire(alive);
    ASSERT_EQ(g->outcome, WorkUnitDispatcher::Outcome::kUnit);
    got.insert(g->index);
    EXPECT_FALSE(*c->Commit(alive, g->epoch, g->index));
  }
  EXPECT_EQ(got.size(), 4u);
  EXPECT_TRUE(got.count(a->index) && got.count(b->index));
  const v1::ProgressResponse p = c->Progress();
  EXPECT_TRUE(p.done());
  EXPECT_EQ(p.epochs(0).reissued(), 2u);
  EXPECT_EQ(p.workers_expired(), 1u);
  EXPECT_EQ(p.workers_size(), 1);
}

TEST_F(CoordinatorTest, DrainReleasesAndDeregisterFreesEverything) {
  auto c = Make(1, 2);
  const uint64_t w = *c->Register("w");
  auto a = c->Acquire(w);
  auto b = c->Acquire(w);
  EXPECT_EQ(c->Acquire(w)->outcome, WorkUnitDispatcher::Outcome::kWait);  // All leased.
  EXPECT_TRUE(c->Release(w, a->epoch, a->index).ok());
  EXPECT_EQ(c->Acquire(w)->index, a->index);
  EXPECT_TRUE(c->Deregister(w).ok());
  EXPECT_EQ(c->Deregister(w).code(), absl::StatusCode::kNotFound);
  const uint64_t v = *c->Register("v");
  EXPECT_EQ(c->Acquire(v)->outcome, WorkUnitDispatcher::Outcome::kUnit);
  EXPECT_EQ(c->Progress().epochs(0).reissued(), 3u);
  (void)b;
}

TEST_F(CoordinatorTest, BadCommitsAreRefused) {
  auto c = Make(2, 5);
  const uint64_t w = *c->Register("w");
  EXPECT_EQ(c->Commit(w, 0, 5).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Commit(w, 7, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Commit(w, 1, 0).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c->Progress().epochs(0).committed(), 0u);
}

// Found by a hostile client: commits and releases from workers that never
// held the unit, or of units never leased, were accepted or miscounted.
TEST_F(CoordinatorTest, OnlyALesseeMayCommitOrReleaseAUnit) {
  auto c = Make(1, 4);
  const uint64_t holder = *c->Register("holder"), other = *c->Register("other");
  auto g = c->Acquire(holder);
  ASSERT_EQ(g->outcome, WorkUnitDispatcher::Outcome::kUnit);
  const uint64_t never_registered = 999'999;
  EXPECT_EQ(c->Commit(never_registered, g->epoch, g->index).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(c->Commit(other, g->epoch, g->index).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(c->Release(other, g->epoch, g->index).code(), absl::StatusCode::kPermissionDenied);
  // A unit nobody leased yet: no false duplicate, no counter moves.
  const uint64_t untouched = (g->index + 1) % 4;
  EXPECT_EQ(c->Commit(holder, 0, untouched).status().code(), absl::StatusCode::kFailedPrecondition);
  v1::ProgressResponse p = c->Progress();
  EXPECT_EQ(p.epochs(0).committed(), 0u);
  EXPECT_EQ(p.epochs(0).duplicated(), 0u);
  EXPECT_EQ(p.epochs(0).leased(), 1u);
  // The holder's own commit works, late too: a retry is a duplicate.
  EXPECT_FALSE(*c->Commit(holder, g->epoch, g->index));
  EXPECT_TRUE(*c->Commit(holder, g->epoch, g->index));
  EXPECT_EQ(c->Deregister(never_registered).code(), absl::StatusCode::kNotFound);
}

TEST_F(CoordinatorTest, RegistrationsAreCapped) {
  CoordinatorOptions options;
  options.dispatch.num_epochs = 1;
  options.dispatch.units_per_epoch = 4;
  options.max_workers = 2;
  auto c = *Coordinator::Create(options, [this] { return now_; });
  ASSERT_TRUE(c->Register("a").ok());
  ASSERT_TRUE(c->Register("b").ok());
  EXPECT_EQ(c->Register("c").status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(CoordinatorTest, ProgressSurvivesExportAndImport) {
  auto c = Make(2, 6);
  const uint64_t w = *c->Register("w");
  for (int i = 0; i < 8; ++i) {  // Epoch 0 done, 2 units of epoch 1.
    auto g = c->Acquire(w);
    ASSERT_TRUE(c->Commit(w, g->epoch, g->index).ok());
  }
  auto leased = c->Acquire(w);  // Not committed: must come back after restore.
  const std::string saved = c->ExportProgress();
  auto restored = Make(2, 6);
  ASSERT_TRUE(restored->ImportProgress(saved).ok());
  const v1::ProgressResponse p = restored->Progress();
  EXPECT_EQ(p.current_epoch(), 1u);
  EXPECT_EQ(p.epochs(0).committed(), 6u);
  EXPECT_EQ(p.epochs(1).committed(), 2u);
  const uint64_t v = *restored->Register("v");
  std::set<uint64_t> remaining;
  for (int i = 0; i < 4; ++i) {
    auto g = restored->Acquire(v);
    ASSERT_EQ(g->outcome, WorkUnitDispatcher::Outcome::kUnit);
    remaining.insert(g->index);
    ASSERT_FALSE(*restored->Commit(v, g->epoch, g->index));
  }
  EXPECT_TRUE(remaining.count(leased->index));
  EXPECT_TRUE(restored->Progress().done());
  auto other = Make(3, 6);
  EXPECT_EQ(other->ImportProgress(saved).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(other->ImportProgress("junk").code(), absl::StatusCode::kDataLoss);
}

TEST_F(CoordinatorTest, NoUnitIsLeasedBeforeMinWorkersAreRegisteredTogether) {
  for (Consistency mode : {Consistency{}, Consistency{v1::CONSISTENCY_SYNC, 0}}) {
    SCOPED_TRACE(mode.mode);
    auto c = Make(1, 100, mode, /*min_workers=*/3);
    const uint64_t a = *c->Register("a"), b = *c->Register("b");
    auto early = c->Acquire(a);
    ASSERT_TRUE(early.ok());
    EXPECT_EQ(early->outcome, WorkUnitDispatcher::Outcome::kWait);
    EXPECT_EQ(early->workers_to_start, 1u);
    EXPECT_EQ(c->Progress().workers_to_start(), 1u);
    // One that left does not count towards the start.
    ASSERT_TRUE(c->Deregister(b).ok());
    EXPECT_EQ(c->Acquire(a)->workers_to_start, 2u);
    const uint64_t d = *c->Register("d");
    EXPECT_EQ(c->Acquire(d)->outcome, WorkUnitDispatcher::Outcome::kWait);
    const uint64_t e = *c->Register("e");
    auto first = c->Acquire(a);
    EXPECT_EQ(first->outcome, WorkUnitDispatcher::Outcome::kUnit);
    EXPECT_EQ(first->workers_to_start, 0u);
    EXPECT_EQ(c->Progress().workers_to_start(), 0u);
    // Started: fewer workers than min_workers go on training.
    ASSERT_TRUE(c->Deregister(d).ok());
    ASSERT_TRUE(c->Deregister(e).ok());
    if (mode.mode == v1::CONSISTENCY_SYNC) {
      ASSERT_TRUE(c->Commit(a, first->epoch, first->index, "push-a").ok());
    } else {
      ASSERT_TRUE(c->Commit(a, first->epoch, first->index).ok());
      EXPECT_EQ(c->Acquire(a)->outcome, WorkUnitDispatcher::Outcome::kUnit);
    }
  }
}

TEST_F(CoordinatorTest, AWaitingAcquireGetsItsUnitWhenTheLastWorkerRegisters) {
  auto c = Make(1, 100, {}, /*min_workers=*/2, /*acquire_wait=*/absl::Seconds(60));
  const uint64_t a = *c->Register("a");
  const absl::Time start = absl::Now();
  std::future<absl::StatusOr<WorkUnitDispatcher::Grant>> waiting =
      std::async(std::launch::async, [&] { return c->Acquire(a); });
  // Still waiting: nobody else registered.
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  ASSERT_TRUE(c->Register("b").ok());
  absl::StatusOr<WorkUnitDispatcher::Grant> grant = waiting.get();
  ASSERT_TRUE(grant.ok());
  EXPECT_EQ(grant->outcome, WorkUnitDispatcher::Outcome::kUnit);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));  // Woken, not timed out.
}

TEST_F(CoordinatorTest, AJobRestoredWithCommittedUnitsHasStarted) {
  auto before = Make(1, 10);
  const uint64_t w = *before->Register("w");
  const std::string nothing_done = before->ExportProgress();
  auto g = before->Acquire(w);
  ASSERT_TRUE(before->Commit(w, g->epoch, g->index).ok());
  const std::string one_done = before->ExportProgress();

  auto gated = Make(1, 10, {}, /*min_workers=*/4);
  ASSERT_TRUE(gated->ImportProgress(nothing_done).ok());
  EXPECT_EQ(gated->Acquire(*gated->Register("v"))->outcome, WorkUnitDispatcher::Outcome::kWait);
  auto restored = Make(1, 10, {}, /*min_workers=*/4);
  ASSERT_TRUE(restored->ImportProgress(one_done).ok());
  EXPECT_EQ(restored->Acquire(*restored->Register("v"))->outcome,
            WorkUnitDispatcher::Outcome::kUnit);
}

TEST_F(CoordinatorTest, SspHoldsTheFastestWithinTheBoundOfTheSlowest) {
  auto c = Make(1, 1000, Consistency{v1::CONSISTENCY_SSP, 2});
  const uint64_t fast = *c->Register("fast"), slow = *c->Register("slow");
  auto take = [&](uint64_t w) {
    auto g = c->Acquire(w);
    EXPECT_TRUE(g.ok());
    if (g->outcome == WorkUnitDispatcher::Outcome::kUnit) {
      EXPECT_FALSE(*c->Commit(w, g->epoch, g->index));
    }
    return g->outcome;
  };
  for (int i = 0; i < 3; ++i) EXPECT_EQ(take(fast), WorkUnitDispatcher::Outcome::kUnit);
  EXPECT_EQ(take(fast), WorkUnitDispatcher::Outcome::kWait);  // 3 ahead > bound 2.
  EXPECT_EQ(take(slow), WorkUnitDispatcher::Outcome::kUnit);  // The slowest never waits.
  EXPECT_EQ(take(fast), WorkUnitDispatcher::Outcome::kUnit);
  EXPECT_EQ(take(fast), WorkUnitDispatcher::Outcome::kWait);
  // A newcomer starts at the slowest clock and does not hold anyone back.
  const uint64_t late = *c->Register("late");
  EXPECT_EQ(take(late), WorkUnitDispatcher::Outcome::kUnit);
  // The slow worker dies: its lease expires and it leaves the clock.
  for (int i = 0; i < 3; ++i) {
    Advance(absl::Seconds(5));
    ASSERT_TRUE(c->Heartbeat(fast).ok());
    ASSERT_TRUE(c->Heartbeat(late).ok());
  }
  EXPECT_EQ(c->Heartbeat(slow).code(), absl::StatusCode::kNotFound);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(take(late), WorkUnitDispatcher::Outcome::kUnit);
  EXPECT_EQ(take(fast), WorkUnitDispatcher::Outcome::kUnit);  // Min is now `late`'s clock.
}

TEST(ConsistencyTest, ParsesModes) {
  EXPECT_EQ(ParseConsistency("async")->mode, v1::CONSISTENCY_ASYNC);
  EXPECT_EQ(ParseConsistency("sync")->mode, v1::CONSISTENCY_SYNC);
  const Consistency ssp = *ParseConsistency("ssp:8");
  EXPECT_EQ(ssp.mode, v1::CONSISTENCY_SSP);
  EXPECT_EQ(ssp.ssp_bound, 8);
  EXPECT_EQ(ConsistencyName(ssp), "ssp:8");
  EXPECT_EQ(ParseConsistency("ssp:0")->ssp_bound, 0);
  EXPECT_EQ(ParseConsistency("ssp:-1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseConsistency("ssp").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseConsistency("bsp").status().code(), absl::StatusCode::kInvalidArgument);
  const Consistency local = *ParseConsistency("local:16");
  EXPECT_EQ(local.mode, v1::CONSISTENCY_LOCAL);
  EXPECT_EQ(local.local_steps, 16);
  EXPECT_EQ(ConsistencyName(local), "local:16");
  EXPECT_EQ(ParseConsistency("local:1")->local_steps, 1);
  for (const char* bad : {"local:0", "local:-4", "local:", "local:x", "local:100001", "local"}) {
    EXPECT_EQ(ParseConsistency(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// Local mode: a worker's units stay with it for its whole round (their
// gradient lands only at the round's end), and go back when it dies.
TEST_F(CoordinatorTest, LocalModeKeepsUnitsWithALiveWorkerAndReissuesThemWhenItDies) {
  Consistency local;
  local.mode = v1::CONSISTENCY_LOCAL;
  local.local_steps = 4;
  auto c = Make(1, 8, local);
  EXPECT_EQ(c->unit_lease(), absl::InfiniteDuration());
  EXPECT_EQ(c->Progress().consistency(), v1::CONSISTENCY_LOCAL);
  EXPECT_EQ(c->Progress().local_steps(), 4u);
  const uint64_t w = *c->Register("w"), other = *c->Register("other");
  std::vector<WorkUnitDispatcher::Grant> round;
  for (int i = 0; i < 4; ++i) round.push_back(*c->Acquire(w));
  for (int i = 0; i < 20; ++i) {  // 100 s: far past any unit lease, not the worker's.
    Advance(absl::Seconds(5));
    ASSERT_TRUE(c->Heartbeat(w).ok());
    ASSERT_TRUE(c->Heartbeat(other).ok());
  }
  EXPECT_EQ(c->Progress().epochs(0).reissued(), 0u);
  for (const auto& g : round) EXPECT_FALSE(*c->Commit(w, g.epoch, g.index));
  const uint64_t dies = *c->Register("dies");
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(c->Acquire(dies)->outcome, WorkUnitDispatcher::Outcome::kUnit);
  }
  for (int i = 0; i < 3; ++i) {  // Its worker lease (10 s) runs out.
    Advance(absl::Seconds(5));
    ASSERT_TRUE(c->Heartbeat(other).ok());
  }
  EXPECT_EQ(c->Progress().epochs(0).reissued(), 2u);
}

// Presence: a trainer killed mid-step (its presence stream broke) gives its
// unit back after the grace (2 s), not its whole worker lease (10 s); a
// stream the coordinator ended, a second stream still open, or a renewal
// keeps the lease.
TEST_F(CoordinatorTest, ABrokenPresenceStreamCutsTheLeaseToTheGrace) {
  auto c = Make(1, 8);
  const uint64_t dies = *c->Register("dies"), ends = *c->Register("ends"),
                 reopens = *c->Register("reopens"), beats = *c->Register("beats");
  for (uint64_t w : {dies, ends, reopens, beats}) {
    ASSERT_EQ(c->Acquire(w)->outcome, WorkUnitDispatcher::Outcome::kUnit);
    ASSERT_TRUE(c->OpenPresence(w).ok());
  }
  ASSERT_TRUE(c->OpenPresence(reopens).ok());  // Its next stream opened before the old one broke.
  c->ClosePresence(dies, /*broken=*/true);
  c->ClosePresence(ends, /*broken=*/false);
  c->ClosePresence(reopens, /*broken=*/true);
  c->ClosePresence(beats, /*broken=*/true);
  Advance(absl::Milliseconds(1500));
  ASSERT_TRUE(c->Heartbeat(beats).ok());              // Alive after all: the cut is lifted.
  EXPECT_EQ(c->Progress().epochs(0).reissued(), 0u);  // Within the grace.
  Advance(absl::Milliseconds(1000));
  v1::ProgressResponse p = c->Progress();
  EXPECT_EQ(p.epochs(0).reissued(), 1u);
  EXPECT_EQ(p.workers_expired(), 1u);
  std::set<std::string> live;
  for (const auto& w : p.workers()) live.insert(w.name());
  EXPECT_EQ(live, (std::set<std::string>{"ends", "reopens", "beats"}));
  EXPECT_EQ(c->OpenPresence(dies).code(), absl::StatusCode::kNotFound);

  Advance(absl::Seconds(5));  // 7.5 s since the others' last renewal: within the lease.
  EXPECT_EQ(c->Progress().workers_size(), 3);
}

TEST_F(CoordinatorTest, PresenceGraceZeroLeavesTheLeaseAlone) {
  CoordinatorOptions o;
  o.dispatch.num_epochs = 1;
  o.dispatch.units_per_epoch = 4;
  o.worker_lease = absl::Seconds(10);
  o.presence_grace = absl::ZeroDuration();
  auto c = Coordinator::Create(o, [this] { return now_; });
  ASSERT_TRUE(c.ok()) << c.status();
  const uint64_t w = *(*c)->Register("w");
  ASSERT_TRUE((*c)->OpenPresence(w).ok());
  (*c)->ClosePresence(w, /*broken=*/true);
  Advance(absl::Seconds(9));
  EXPECT_EQ((*c)->Progress().workers_size(), 1);
  Advance(absl::Seconds(2));
  EXPECT_EQ((*c)->Progress().workers_size(), 0);
}

}  // namespace
}  // namespace spotps
