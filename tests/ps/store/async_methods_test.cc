// The async staleness methods on a real ShardStore with real tensors:
// shard-side averaging (avg), the asynchrony-aware beta1 (momentum) and the
// warmup per live worker (warmup), each against its formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/tensor_codec.h"
#include "ps/store/shard_store.h"

namespace spotps {
namespace {

constexpr int64_t kN = 6;

// One partition of kN elements, initialised to 1.
std::unique_ptr<ShardStore> Store(const ShardOptions& options) {
  auto store = ShardStore::Create(options);
  EXPECT_TRUE(store.ok()) << store.status();
  auto layout = ModelLayout::Create({{"w", {kN}}});
  std::vector<float> ones(kN, 1.0f);
  std::string bytes;
  AppendEncoded(ones.data(), kN, v1::DTYPE_FP32, &bytes);
  EXPECT_TRUE((*store)->Init(*layout, {PayloadRange{0, 0, bytes, 0}}).ok());
  return *std::move(store);
}

ShardOptions Sgd(double lr) {
  ShardOptions o;
  o.optimizer.kind = OptimizerKind::kSgd;
  o.schedule.base_lr = lr;
  return o;
}

// Pushes gradient g(i) = scale * (i + 1) based on `version`, with the
// push's `gradient_scale`, sent by `sender`.
absl::StatusOr<PushOutcome> PushScaled(ShardStore& store, const std::string& id, float scale,
                                       uint64_t version, float gradient_scale = 1.0f,
                                       const PushSender& sender = {}) {
  std::vector<float> g(kN);
  for (int64_t i = 0; i < kN; ++i) g[i] = scale * static_cast<float>(i + 1);
  std::string bytes;
  AppendEncoded(g.data(), kN, v1::DTYPE_FP32, &bytes);
  return store.Push(id, v1::DTYPE_FP32, {PayloadRange{0, 0, bytes, version}}, nullptr,
                    gradient_scale, sender);
}

// The first push of a worker the shard has just started to count.
const PushSender kNewWorker{"new", true};

std::vector<float> Weights(const ShardStore& store) {
  std::string bytes;
  EXPECT_TRUE(store.Read(0, v1::DTYPE_FP32, &bytes).ok());
  std::vector<float> w(kN);
  EXPECT_TRUE(DecodeToFp32(v1::DTYPE_FP32, bytes, kN, w.data()).ok());
  return w;
}

// A "fresh" averaging store (SGD, lr 0.5) that counts `live` workers.
std::unique_ptr<ShardStore> FreshStore(int live) {
  ShardOptions o = Sgd(0.5);
  o.staleness.average = o.staleness.fresh = true;
  auto store = Store(o);
  store->SetLiveWorkers(live);
  return store;
}

uint64_t Applied(const ShardStore& store) {
  v1::StatsResponse stats;
  store.FillStats(&stats);
  return stats.pushes_applied();
}

uint64_t WaitedOut(const ShardStore& store) {
  v1::StatsResponse stats;
  store.FillStats(&stats);
  return stats.averaged_updates_waited_out();
}

TEST(AveragedPushesTest, HoldsUntilKThenAppliesTheMeanOnceAndDedups) {
  ShardOptions o = Sgd(0.1);
  o.staleness.average = true;
  o.staleness.average_pushes = 2;
  auto store = Store(o);
  auto first = PushScaled(*store, "a", 1.0f, 0);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->averaged_later);
  EXPECT_FALSE(first->duplicate);
  EXPECT_EQ(Weights(*store), std::vector<float>(kN, 1.0f));  // Held, not applied.
  EXPECT_EQ(*store->Version(0), 0u);
  EXPECT_EQ(store->held_pushes(), 1u);
  // A retry of a held push is a duplicate: it is applied once, with the batch.
  auto retry = PushScaled(*store, "a", 1.0f, 0);
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->duplicate);
  EXPECT_EQ(store->held_pushes(), 1u);
  ASSERT_TRUE(PushScaled(*store, "b", 3.0f, 0).ok());
  EXPECT_EQ(store->held_pushes(), 0u);
  EXPECT_EQ(*store->Version(0), 1u);
  EXPECT_EQ(store->global_step(), 1u);
  EXPECT_EQ(Applied(*store), 2u);
  const std::vector<float> w = Weights(*store);
  for (int64_t i = 0; i < kN; ++i) {
    EXPECT_NEAR(w[i], 1.0 - 0.1 * 2.0 * (i + 1), 1e-6) << i;  // The mean, 2(i+1).
  }
  // A retry after the update is a duplicate too.
  auto late = PushScaled(*store, "b", 3.0f, 0);
  ASSERT_TRUE(late.ok());
  EXPECT_TRUE(late->duplicate);
  EXPECT_EQ(*store->Version(0), 1u);
}

TEST(AveragedPushesTest, TheBoundedWaitAppliesFewerAndLiveWorkersSetK) {
  ShardOptions o = Sgd(0.5);
  o.staleness.average = true;  // k = live workers.
  auto store = Store(o);
  store->SetLiveWorkers(3);
  ASSERT_TRUE(PushScaled(*store, "a", 1.0f, 0).ok());
  ASSERT_TRUE(PushScaled(*store, "b", 2.0f, 0).ok());
  EXPECT_EQ(store->held_pushes(), 2u);
  EXPECT_FALSE(store->ApplyHeldOlderThan(absl::Hours(1)));  // Not old enough.
  EXPECT_EQ(WaitedOut(*store), 0u);
  EXPECT_TRUE(store->ApplyHeldOlderThan(absl::ZeroDuration()));
  EXPECT_FALSE(store->ApplyHeldOlderThan(absl::ZeroDuration()));  // Nothing held.
  EXPECT_EQ(Applied(*store), 2u);
  EXPECT_EQ(WaitedOut(*store), 1u);  // 2 of 3 when the wait ran out.
  std::vector<float> w = Weights(*store);
  EXPECT_FLOAT_EQ(w[0], 1.0f - 0.5f * 1.5f);
  // Three live workers: the third push makes the update.
  ASSERT_TRUE(PushScaled(*store, "c", 1.0f, 1).ok());
  ASSERT_TRUE(PushScaled(*store, "d", 1.0f, 1).ok());
  EXPECT_EQ(*store->Version(0), 1u);
  ASSERT_TRUE(PushScaled(*store, "e", 4.0f, 0).ok());  // Stale by one: still taken.
  EXPECT_EQ(*store->Version(0), 2u);
  w = Weights(*store);
  EXPECT_FLOAT_EQ(w[0], 1.0f - 0.5f * 1.5f - 0.5f * 2.0f);
  EXPECT_EQ(WaitedOut(*store), 1u);  // The full one did not wait.
}

// A worker leaving (k falls) frees an update that waits only for its push:
// it is applied at once, not after the bounded wait.
TEST(AveragedPushesTest, FewerLiveWorkersApplyAnUpdateThatHoldsAllOfTheirs) {
  auto store = FreshStore(3);
  ASSERT_TRUE(PushScaled(*store, "a", 1.0f, 0).ok());
  ASSERT_TRUE(PushScaled(*store, "b", 2.0f, 0).ok());
  store->SetLiveWorkers(3);  // No change: still waiting for the third.
  EXPECT_EQ(store->held_pushes(), 2u);
  store->SetLiveWorkers(2);
  EXPECT_EQ(store->held_pushes(), 0u);
  EXPECT_EQ(*store->Version(0), 1u);
  EXPECT_EQ(WaitedOut(*store), 0u);  // Freed by the leave, not the wait.
  EXPECT_TRUE(store->WaitForAveragedUpdate(1, absl::Now()));
  EXPECT_FLOAT_EQ(Weights(*store)[0], 1.0f - 0.5f * 1.5f);
  // An update short of even the smaller k still waits.
  store->SetLiveWorkers(4);
  ASSERT_TRUE(PushScaled(*store, "c", 1.0f, 1).ok());
  ASSERT_TRUE(PushScaled(*store, "d", 1.0f, 1).ok());
  store->SetLiveWorkers(3);
  EXPECT_EQ(store->held_pushes(), 2u);
  EXPECT_EQ(*store->Version(0), 1u);
}

// "fresh": a new worker's first push (the service counts the worker just
// before it) waits for the update after the open one if that one holds
// pushes already, and joins it if it holds none.
TEST(AveragedPushesTest, ANewWorkersFirstPushWaitsForTheUpdateAfterAnOpenOne) {
  auto store = FreshStore(3);
  ASSERT_TRUE(PushScaled(*store, "a", 1.0f, 0).ok());
  ASSERT_TRUE(PushScaled(*store, "b", 2.0f, 0).ok());
  store->SetLiveWorkers(4);
  auto joiner = PushScaled(*store, "new", 9.0f, 0, 1.0f, kNewWorker);
  ASSERT_TRUE(joiner.ok()) << joiner.status();
  EXPECT_EQ(joiner->average_update, 2u);
  EXPECT_EQ(store->held_pushes(), 3u);
  auto third = PushScaled(*store, "c", 3.0f, 0);  // The open update's k is still 3.
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->average_update, 1u);
  EXPECT_EQ(*store->Version(0), 1u);
  EXPECT_FLOAT_EQ(Weights(*store)[0], 1.0f - 0.5f * 2.0f);  // The mean of a, b and c.
  EXPECT_EQ(store->held_pushes(), 1u);
  EXPECT_FALSE(store->WaitForAveragedUpdate(2, absl::Now()));
  // Its wait starts as the update becomes the open one, not at its arrival.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(store->ApplyHeldOlderThan(absl::Seconds(60)));
  for (const char* id : {"d", "e", "f"}) ASSERT_TRUE(PushScaled(*store, id, 1.0f, 1).ok());
  EXPECT_EQ(*store->Version(0), 2u);
  EXPECT_FLOAT_EQ(Weights(*store)[0], 1.0f - 0.5f * 2.0f - 0.5f * 3.0f);  // (9 + 3 x 1) / 4.
  EXPECT_EQ(WaitedOut(*store), 0u);
  // The open update holds nothing yet: a new worker's push joins it.
  store->SetLiveWorkers(5);
  auto second = PushScaled(*store, "new-2", 1.0f, 2, 1.0f, PushSender{"new-2", true});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->average_update, 3u);
}

// A worker that stops counting while its push is held (a trainer killed as
// it waits for its update) leaves the push in the update without counting
// it: the update still waits for every remaining worker's push. Counted,
// it would close the update one live push early.
TEST(AveragedPushesTest, AHeldPushOfAWorkerThatStoppedCountingCompletesNothing) {
  auto store = FreshStore(3);
  ASSERT_TRUE(PushScaled(*store, "a", 1.0f, 0, 1.0f, {"trainer-a"}).ok());
  ASSERT_TRUE(PushScaled(*store, "d", 5.0f, 0, 1.0f, {"trainer-d"}).ok());
  store->StopCounting("trainer-d", 2);
  EXPECT_EQ(*store->Version(0), 0u);  // Still waiting for trainer-b.
  EXPECT_EQ(store->held_pushes(), 2u);
  ASSERT_TRUE(PushScaled(*store, "b", 3.0f, 0, 1.0f, {"trainer-b"}).ok());
  EXPECT_EQ(*store->Version(0), 1u);
  EXPECT_FLOAT_EQ(Weights(*store)[0], 1.0f - 0.5f * 3.0f);  // All three: (1 + 5 + 3) / 3.
  EXPECT_EQ(WaitedOut(*store), 0u);

  // A new worker's first push held for the next update no longer lowers
  // the open one's k once that worker stops counting.
  ASSERT_TRUE(PushScaled(*store, "a2", 1.0f, 1, 1.0f, {"trainer-a"}).ok());
  store->SetLiveWorkers(3);
  auto joiner = PushScaled(*store, "n", 7.0f, 1, 1.0f, kNewWorker);
  ASSERT_TRUE(joiner.ok()) << joiner.status();
  EXPECT_EQ(joiner->average_update, 3u);
  store->StopCounting(kNewWorker.worker, 2);
  EXPECT_EQ(*store->Version(0), 1u);  // Still waiting for trainer-b.
  ASSERT_TRUE(PushScaled(*store, "b2", 3.0f, 1, 1.0f, {"trainer-b"}).ok());
  EXPECT_EQ(*store->Version(0), 2u);
  EXPECT_FLOAT_EQ(Weights(*store)[0], 1.0f - 0.5f * 3.0f - 0.5f * 2.0f);  // (1 + 3) / 2.
  // The next update holds the joiner's push, and waits for both others.
  ASSERT_TRUE(PushScaled(*store, "a3", 1.0f, 2, 1.0f, {"trainer-a"}).ok());
  EXPECT_EQ(*store->Version(0), 2u);
  ASSERT_TRUE(PushScaled(*store, "b3", 1.0f, 2, 1.0f, {"trainer-b"}).ok());
  EXPECT_EQ(*store->Version(0), 3u);
  EXPECT_FLOAT_EQ(Weights(*store)[0], 1.0f - 0.5f * 3.0f - 0.5f * 2.0f - 0.5f * 3.0f);  // 9 / 3.
  EXPECT_EQ(WaitedOut(*store), 0u);
}

// A duplicate push (a unit trained again after its trainer died having
// pushed it) stands in for its worker's push: the open update does not
// wait out the wait for it. A retry of a push still held adds nothing, and
// an update of stand-ins alone moves no weight.
TEST(AveragedPushesTest, ADuplicatePushStandsInForItsWorkersPush) {
  auto store = FreshStore(3);
  ASSERT_TRUE(PushScaled(*store, "unit-7", 5.0f, 0, 1.0f, {"trainer-dead"}).ok());
  ASSERT_TRUE(PushScaled(*store, "a1", 1.0f, 0, 1.0f, {"trainer-a"}).ok());
  ASSERT_TRUE(PushScaled(*store, "b1", 3.0f, 0, 1.0f, {"trainer-b"}).ok());
  ASSERT_EQ(*store->Version(0), 1u);
  store->StopCounting("trainer-dead", 2);
  float w = Weights(*store)[0];
  EXPECT_FLOAT_EQ(w, 1.0f - 0.5f * 3.0f);

  ASSERT_TRUE(PushScaled(*store, "a2", 1.0f, 1, 1.0f, {"trainer-a"}).ok());
  auto again = PushScaled(*store, "unit-7", 9.0f, 1, 1.0f, {"trainer-b"});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->duplicate);
  EXPECT_TRUE(again->averaged_later);
  EXPECT_EQ(again->average_update, 2u);
  EXPECT_EQ(*store->Version(0), 2u);  // a2 alone moved the weights.
  w -= 0.5f * 1.0f;
  EXPECT_FLOAT_EQ(Weights(*store)[0], w);
  EXPECT_EQ(WaitedOut(*store), 0u);

  ASSERT_TRUE(PushScaled(*store, "a3", 1.0f, 2, 1.0f, {"trainer-a"}).ok());
  auto retry = PushScaled(*store, "a3", 1.0f, 2, 1.0f, {"trainer-a"});
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->duplicate);
  EXPECT_EQ(retry->average_update, 3u);  // Answered with the held push's update.
  EXPECT_EQ(*store->Version(0), 2u);     // Still waiting for trainer-b.
  ASSERT_TRUE(PushScaled(*store, "b3", 3.0f, 2, 1.0f, {"trainer-b"}).ok());
  EXPECT_EQ(*store->Version(0), 3u);
  w -= 0.5f * 2.0f;
  EXPECT_FLOAT_EQ(Weights(*store)[0], w);

  for (const char* worker : {"trainer-a", "trainer-b"}) {
    auto stand_in = PushScaled(*store, "unit-7", 1.0f, 3, 1.0f, {worker});
    ASSERT_TRUE(stand_in.ok());
    EXPECT_EQ(stand_in->average_update, 4u);
  }
  EXPECT_TRUE(store->WaitForAveragedUpdate(4, absl::Now()));
  EXPECT_EQ(*store->Version(0), 3u);
  EXPECT_FLOAT_EQ(Weights(*store)[0], w);
  EXPECT_EQ(store->held_pushes(), 0u);
}

// Without "fresh" no trainer waits for an update, and a new worker's push
// joins the open one.
TEST(AveragedPushesTest, WithoutFreshANewWorkersPushJoinsTheOpenUpdate) {
  ShardOptions o = Sgd(0.5);
  o.staleness.average = true;
  auto store = Store(o);
  store->SetLiveWorkers(2);
  ASSERT_TRUE(PushScaled(*store, "a", 1.0f, 0).ok());
  store->SetLiveWorkers(3);
  auto joiner = PushScaled(*store, "new", 1.0f, 0, 1.0f, kNewWorker);
  ASSERT_TRUE(joiner.ok());
  EXPECT_EQ(joiner->average_update, 1u);
  EXPECT_EQ(store->held_pushes(), 2u);
}

// Local mode (share_of_k): an update short of its k pushes moves the
// weights by their sum / k; a full one by their mean, as without it.
TEST(AveragedPushesTest, ShareOfKAppliesAShortUpdatesSumOverK) {
  ShardOptions o = Sgd(0.5);
  o.staleness.average = true;
  o.staleness.share_of_k = true;
  auto store = Store(o);
  store->SetLiveWorkers(4);
  ASSERT_TRUE(PushScaled(*store, "a", 1.0f, 0).ok());
  ASSERT_TRUE(PushScaled(*store, "b", 2.0f, 0).ok());
  EXPECT_TRUE(store->ApplyHeldOlderThan(absl::ZeroDuration()));
  std::vector<float> w = Weights(*store);
  EXPECT_FLOAT_EQ(w[1], 1.0f - 0.5f * (1.0f + 2.0f) * 2.0f / 4.0f);
  for (const char* id : {"c", "d", "e", "f"}) ASSERT_TRUE(PushScaled(*store, id, 1.0f, 1).ok());
  EXPECT_EQ(*store->Version(0), 2u);
  EXPECT_FLOAT_EQ(Weights(*store)[1], w[1] - 0.5f * 2.0f);
}

// Local mode: the update a replacement's first round opens waits for the
// others' rounds (AveragingWaits::new_workers_round), so that it is
// averaged whole with theirs and its rounds end with theirs from then on.
// Applied after the common wait, it went alone and the rounds after it
// split in two, each waiting out that wait.
TEST(AveragedPushesTest, ShareOfKHoldsANewWorkersFirstRoundForTheOthers) {
  ShardOptions o = Sgd(0.5);
  o.staleness.average = o.staleness.fresh = o.staleness.share_of_k = true;
  auto store = Store(o);
  store->SetLiveWorkers(3);
  const AveragingWaits waits{absl::ZeroDuration(), absl::Hours(1)};
  auto joiner = PushScaled(*store, "new", 4.0f, 0, 1.0f, kNewWorker);
  ASSERT_TRUE(joiner.ok()) << joiner.status();
  EXPECT_FALSE(store->ApplyHeldOlderThan(waits));  // Waits past the common wait.
  ASSERT_TRUE(PushScaled(*store, "a", 1.0f, 0).ok());
  ASSERT_TRUE(PushScaled(*store, "b", 1.0f, 0).ok());
  EXPECT_EQ(*store->Version(0), 1u);                        // Whole: its 3 pushes.
  EXPECT_FLOAT_EQ(Weights(*store)[0], 1.0f - 0.5f * 2.0f);  // (4 + 1 + 1) / 3.
  EXPECT_EQ(WaitedOut(*store), 0u);
  // An update an old worker's push opens waits the common wait only.
  ASSERT_TRUE(PushScaled(*store, "a2", 1.0f, 1).ok());
  EXPECT_TRUE(store->ApplyHeldOlderThan(waits));
  // A new worker's push in an update already open changes nothing of that.
  ASSERT_TRUE(PushScaled(*store, "a3", 1.0f, 2).ok());
  ASSERT_TRUE(PushScaled(*store, "new-2", 1.0f, 2, 1.0f, PushSender{"new-2", true}).ok());
  EXPECT_TRUE(store->ApplyHeldOlderThan(waits));
  // Its own wait ends too: then it goes alone, as its share of k.
  ASSERT_TRUE(PushScaled(*store, "new-3", 3.0f, 3, 1.0f, PushSender{"new-3", true}).ok());
  EXPECT_TRUE(store->ApplyHeldOlderThan(AveragingWaits{absl::Hours(1), absl::ZeroDuration()}));
  EXPECT_EQ(WaitedOut(*store), 3u);
}

// Local mode with Nesterov momentum (its default outer optimizer): rounds
// whose two pushes arrive apart, each applied alone as its 1/2 share, move
// the weights about as far as rounds averaged whole do, because each short
// update steps the momentum by its share only. Stepping it fully each time
// moved them ~1.7x as far, so that churn, which splits rounds, overshot.
TEST(AveragedPushesTest, ShareOfKStepsTheMomentumByItsShare) {
  ShardOptions o = Sgd(0.05);
  o.optimizer.momentum = 0.9f;
  o.optimizer.nesterov = true;
  o.staleness.average = true;
  o.staleness.share_of_k = true;
  auto whole = Store(o);
  auto split = Store(o);
  whole->SetLiveWorkers(2);
  split->SetLiveWorkers(2);
  constexpr int kRounds = 30;
  for (int round = 0; round < kRounds; ++round) {
    const std::string a = absl::StrCat("a", round), b = absl::StrCat("b", round);
    const uint64_t version = static_cast<uint64_t>(round);
    ASSERT_TRUE(PushScaled(*whole, a, 1.0f, version).ok());
    ASSERT_TRUE(PushScaled(*whole, b, 1.0f, version).ok());
    ASSERT_TRUE(PushScaled(*split, a, 1.0f, 2 * version).ok());
    EXPECT_TRUE(split->ApplyHeldOlderThan(absl::ZeroDuration()));
    ASSERT_TRUE(PushScaled(*split, b, 1.0f, 2 * version).ok());
    EXPECT_TRUE(split->ApplyHeldOlderThan(absl::ZeroDuration()));
  }
  ASSERT_EQ(*whole->Version(0), static_cast<uint64_t>(kRounds));
  ASSERT_EQ(*split->Version(0), static_cast<uint64_t>(2 * kRounds));
  const std::vector<float> w = Weights(*whole), s = Weights(*split);
  for (int64_t i = 0; i < kN; ++i) {
    const float moved = 1.0f - w[i];
    ASSERT_GT(moved, 0.0f);
    EXPECT_NEAR(1.0f - s[i], moved, 0.03f * moved) << "element " << i;
  }
}

// "fresh" builds on the update numbers: a push learns which averaged update
// will hold it, and a waiter wakes exactly when that one is applied.
TEST(AveragedPushesTest, EachPushLearnsItsUpdateAndCanWaitForIt) {
  ShardOptions o = Sgd(0.1);
  o.staleness.average = o.staleness.fresh = true;
  o.staleness.average_pushes = 2;
  auto store = Store(o);
  auto first = PushScaled(*store, "a", 1.0f, 0);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->average_update, 1u);
  // Not applied yet: the wait runs out.
  EXPECT_FALSE(store->WaitForAveragedUpdate(1, absl::Now() + absl::Milliseconds(50)));
  std::atomic<bool> woke{false};
  std::thread waiter([&] {
    woke = store->WaitForAveragedUpdate(1, absl::Now() + absl::Seconds(30));
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(woke.load());
  auto second = PushScaled(*store, "b", 1.0f, 0);  // Makes update 1.
  waiter.join();
  EXPECT_TRUE(woke.load());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->average_update, 1u);
  EXPECT_EQ(*store->Version(0), 1u);
  // The next push goes into update 2, which the bounded wait makes alone.
  auto third = PushScaled(*store, "c", 1.0f, 1);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->average_update, 2u);
  EXPECT_FALSE(store->WaitForAveragedUpdate(2, absl::Now()));
  EXPECT_TRUE(store->ApplyHeldOlderThan(absl::ZeroDuration()));
  EXPECT_TRUE(store->WaitForAveragedUpdate(2, absl::Now()));
  EXPECT_EQ(*store->Version(0), 2u);
}

TEST(AveragedPushesTest, ALoneWorkersPushIsAppliedOnArrival) {
  auto store = FreshStore(1);
  auto pushed = PushScaled(*store, "a", 1.0f, 0);
  ASSERT_TRUE(pushed.ok());
  EXPECT_FALSE(pushed->averaged_later);
  EXPECT_EQ(store->held_pushes(), 0u);
  EXPECT_EQ(*store->Version(0), 1u);
  EXPECT_FLOAT_EQ(Weights(*store)[1], 1.0f - 0.5f * 2.0f);
  // A second worker: pushes are held for the average again.
  store->SetLiveWorkers(2);
  pushed = PushScaled(*store, "b", 1.0f, 1);
  ASSERT_TRUE(pushed.ok());
  EXPECT_TRUE(pushed->averaged_later);
  EXPECT_EQ(store->held_pushes(), 1u);
}

TEST(AveragedPushesTest, ExportLeavesHeldPushIdsOut) {
  ShardOptions o = Sgd(0.1);
  o.staleness.average = true;
  o.staleness.average_pushes = 2;
  auto store = Store(o);
  ASSERT_TRUE(PushScaled(*store, "held", 1.0f, 0).ok());
  auto state = store->ExportState();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(std::count(state->recent_push_ids.begin(), state->recent_push_ids.end(), "held"), 0);
  EXPECT_EQ(state->partitions[0].weights, std::vector<float>(kN, 1.0f));
  ASSERT_TRUE(PushScaled(*store, "next", 1.0f, 0).ok());
  state = store->ExportState();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(std::count(state->recent_push_ids.begin(), state->recent_push_ids.end(), "held"), 1);
}

TEST(AveragedPushesTest, RefusedInSyncMode) {
  ShardOptions o = Sgd(0.1);
  o.sync_rounds = true;
  o.staleness.average = true;
  EXPECT_EQ(ShardStore::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

// AdamW in double with a beta1 per step.
std::vector<double> AdamWReference(const std::vector<std::vector<double>>& grads,
                                   const std::vector<double>& beta1s, double lr) {
  const double b2 = 0.999, eps = 1e-8;
  std::vector<double> w(kN, 1.0), m(kN, 0.0), v(kN, 0.0);
  for (size_t t = 0; t < grads.size(); ++t) {
    const double b1 = beta1s[t];
    const double step = static_cast<double>(t + 1);
    for (int64_t i = 0; i < kN; ++i) {
      const double g = grads[t][i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double m_hat_scale = lr / (1 - std::pow(b1, step));
      w[i] -= m_hat_scale * (m[i] / (std::sqrt(v[i] / (1 - std::pow(b2, step))) + eps));
    }
  }
  return w;
}

// A push's gradient_scale (the clipping factor a streamed push learns last)
// moves the weights exactly as the pre-scaled gradient would, on every path.
// Local mode's "delayed": Nesterov SGD, lr 0.5, momentum 0.9.
ShardOptions DelayedNesterovOptions() {
  ShardOptions o = Sgd(0.5);
  o.optimizer.momentum = 0.9f;
  o.optimizer.nesterov = true;
  o.staleness.delayed_nesterov = true;
  o.staleness.share_of_k = true;
  return o;
}

// Each push is applied on arrival as its 1/k share; every k-th update also
// steps the momentum, so that a round of k pushes on the same weights is one
// Nesterov step on their mean: w -= lr * (g + 0.9 * (0.9 * buf + g)).
TEST(DelayedNesterovTest, AppliesOnArrivalAndStepsMomentumOncePerKPushes) {
  auto store = Store(DelayedNesterovOptions());
  store->SetLiveWorkers(2);
  auto a = PushScaled(*store, "a", 1.0f, 0);  // Element 1's gradient: 2.
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->averaged_later);
  EXPECT_EQ(*store->Version(0), 1u);
  EXPECT_FLOAT_EQ(Weights(*store)[1], 1.0f - 0.5f * 2.0f / 2.0f);
  EXPECT_TRUE(PushScaled(*store, "a", 1.0f, 0)->duplicate);
  EXPECT_FLOAT_EQ(Weights(*store)[1], 0.5f);
  ASSERT_TRUE(PushScaled(*store, "b", 1.0f, 0).ok());  // One version stale: taken.
  EXPECT_EQ(*store->Version(0), 2u);
  float buf = 2.0f;  // The mean of the round.
  float w = 1.0f - 0.5f * (2.0f + 0.9f * buf);
  EXPECT_FLOAT_EQ(Weights(*store)[1], w);
  // The next round: the momentum carries the first.
  ASSERT_TRUE(PushScaled(*store, "c", 0.5f, 2).ok());
  ASSERT_TRUE(PushScaled(*store, "d", 0.5f, 3).ok());
  buf = 0.9f * buf + 1.0f;
  w -= 0.5f * (1.0f + 0.9f * buf);
  EXPECT_NEAR(Weights(*store)[1], w, 1e-5);
  // A lone worker: every push steps the momentum.
  store->SetLiveWorkers(1);
  ASSERT_TRUE(PushScaled(*store, "e", 1.0f, 4).ok());
  buf = 0.9f * buf + 2.0f;
  w -= 0.5f * (2.0f + 0.9f * buf);
  EXPECT_NEAR(Weights(*store)[1], w, 1e-5);
  EXPECT_EQ(Applied(*store), 5u);
}

// The momentum and the deferred sum are optimizer state: a checkpoint
// carries both (and the update count that says when the momentum steps),
// and a shard with another optimizer refuses it.
TEST(DelayedNesterovTest, MomentumAndDeferredSumSurviveAnExportAndImport) {
  auto store = Store(DelayedNesterovOptions());
  store->SetLiveWorkers(2);
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(PushScaled(*store, id, 1.0f, 0).ok());
  auto state = store->ExportState();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->optimizer_state_slots, 2);
  auto restored = ShardStore::Create(DelayedNesterovOptions());
  ASSERT_TRUE(restored.ok());
  ASSERT_TRUE((*restored)->ImportState(*state).ok());
  (*restored)->SetLiveWorkers(2);
  for (ShardStore* s : {store.get(), restored->get()}) {
    ASSERT_TRUE(PushScaled(*s, "d", 0.5f, 3).ok());  // Steps the momentum.
  }
  EXPECT_EQ(Weights(**restored), Weights(*store));
  ShardOptions plain = DelayedNesterovOptions();
  plain.staleness.delayed_nesterov = false;
  auto other = ShardStore::Create(plain);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->ImportState(*state).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DelayedNesterovTest, RefusedOutsideLocalModeAndUnderAdamW) {
  ShardOptions async = DelayedNesterovOptions();
  async.staleness.share_of_k = false;
  EXPECT_EQ(ShardStore::Create(async).status().code(), absl::StatusCode::kInvalidArgument);
  ShardOptions adamw = DelayedNesterovOptions();
  adamw.optimizer.kind = OptimizerKind::kAdamW;
  EXPECT_EQ(ShardStore::Create(adamw).status().code(), absl::StatusCode::kInvalidArgument);
  ShardOptions plain_momentum = DelayedNesterovOptions();
  plain_momentum.optimizer.nesterov = false;
  EXPECT_EQ(ShardStore::Create(plain_momentum).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GradientScaleTest, AScaledPushEqualsThePushOfTheScaledGradient) {
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdamW}) {
    ShardOptions o = Sgd(0.1);
    o.optimizer.kind = kind;
    auto scaled = Store(o);
    auto prescaled = Store(o);
    for (uint64_t step = 0; step < 3; ++step) {
      ASSERT_TRUE(PushScaled(*scaled, absl::StrCat("s", step), 3.0f, step, 0.375f).ok());
      ASSERT_TRUE(PushScaled(*prescaled, absl::StrCat("p", step), 3.0f * 0.375f, step).ok());
    }
    EXPECT_EQ(Weights(*scaled), Weights(*prescaled)) << static_cast<int>(kind);
    EXPECT_NE(Weights(*scaled), std::vector<float>(kN, 1.0f));
  }
}

TEST(GradientScaleTest, AveragedPushesAreScaledEachByItsOwnFactor) {
  ShardOptions o = Sgd(0.5);
  o.staleness.average = true;
  o.staleness.average_pushes = 2;
  auto store = Store(o);
  ASSERT_TRUE(PushScaled(*store, "a", 2.0f, 0, 0.5f).ok());  // Counts as (i + 1).
  ASSERT_TRUE(PushScaled(*store, "b", 3.0f, 0, 1.0f).ok());  // 3 (i + 1).
  const std::vector<float> w = Weights(*store);
  // The mean, 2 (i + 1), times lr 0.5: exact in binary.
  for (int64_t i = 0; i < kN; ++i) EXPECT_EQ(w[i], 1.0f - static_cast<float>(i + 1)) << i;
}

// Scaled BF16 pushes averaged in any order give the same weights bit for
// bit (each scaled term is rounded back to BF16, so the sums are exact):
// "avg" adds pushes in arrival order, and repeated runs must agree.
TEST(GradientScaleTest, ScaledBf16PushesAverageTheSameInAnyOrder) {
  constexpr int64_t kElements = 4096;
  auto layout = ModelLayout::Create({{"w", {kElements}}});
  ASSERT_TRUE(layout.ok());
  auto make_store = [&] {
    ShardOptions o = Sgd(0.5);
    o.staleness.average = true;
    o.staleness.average_pushes = 3;
    auto store = *ShardStore::Create(o);
    std::vector<float> w(kElements, 1.0f);
    std::string bytes;
    AppendEncoded(w.data(), kElements, v1::DTYPE_FP32, &bytes);
    EXPECT_TRUE(store->Init(*layout, {PayloadRange{0, 0, bytes, 0}}).ok());
    return store;
  };
  std::vector<std::string> payloads(3);
  const float scales[3] = {0.37f, 0.81f, 0.093f};
  for (int p = 0; p < 3; ++p) {
    std::vector<float> g(kElements);
    for (int64_t i = 0; i < kElements; ++i) g[i] = std::sin(0.7f * i + p) * (1 + p);
    AppendEncoded(g.data(), kElements, v1::DTYPE_BF16, &payloads[p]);
  }
  std::vector<std::vector<float>> results;
  for (const std::vector<int>& order : {std::vector<int>{0, 1, 2}, {2, 0, 1}, {1, 2, 0}}) {
    auto store = make_store();
    for (int p : order) {
      ASSERT_TRUE(store->Push(absl::StrCat("p", p), v1::DTYPE_BF16,
                              {PayloadRange{0, 0, payloads[p], 0}}, nullptr, scales[p])
                      .ok());
    }
    ASSERT_EQ(*store->Version(0), 1u);
    std::string bytes;
    ASSERT_TRUE(store->Read(0, v1::DTYPE_FP32, &bytes).ok());
    std::vector<float> w(kElements);
    ASSERT_TRUE(DecodeToFp32(v1::DTYPE_FP32, bytes, kElements, w.data()).ok());
    results.push_back(w);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(GradientScaleTest, AnOutOfRangeScaleIsRefusedAndChangesNothing) {
  auto store = Store(Sgd(0.1));
  for (float bad : {0.0f, -0.5f, 1.5f, std::nanf(""), INFINITY}) {
    auto r = PushScaled(*store, absl::StrCat("bad", bad), 1.0f, 0, bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_NE(r.status().message().find("gradient_scale"), std::string::npos) << r.status();
  }
  EXPECT_EQ(Weights(*store), std::vector<float>(kN, 1.0f));
  EXPECT_EQ(*store->Version(0), 0u);
  EXPECT_EQ(Applied(*store), 0u);
  // The same id is still free: nothing recorded it.
  auto good = PushScaled(*store, "bad0", 1.0f, 0, 1.0f);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_FALSE(good->duplicate);
}

TEST(WaitForVersionTest, ReturnsOnceAPushMovesThePartitionOrAtTheDeadline) {
  auto store = Store(Sgd(0.1));
  EXPECT_TRUE(store->WaitForVersion(0, 0, absl::Now()));
  const absl::Time start = absl::Now();
  EXPECT_FALSE(store->WaitForVersion(0, 1, start + absl::Milliseconds(100)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  std::atomic<bool> woke{false};
  std::thread waiter([&] { woke = store->WaitForVersion(0, 1, absl::Now() + absl::Seconds(30)); });
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(PushScaled(*store, "a", 1.0f, 0).ok());
  waiter.join();
  EXPECT_TRUE(woke);
  EXPECT_FALSE(store->WaitForVersion(7, 0, absl::Now()));  // Not owned.
}

TEST(AsyncMomentumTest, LowersBeta1ByTheImplicitMomentumOfTheRunningStaleness) {
  EXPECT_FLOAT_EQ(AsyncBeta1(0.9f, 0.0), 0.9f);
  EXPECT_FLOAT_EQ(AsyncBeta1(0.9f, 1.0), 0.4f);   // 2 workers: implicit 1/2.
  EXPECT_FLOAT_EQ(AsyncBeta1(0.9f, 3.0), 0.15f);  // 4 workers: implicit 3/4.
  EXPECT_FLOAT_EQ(AsyncBeta1(0.9f, 9.0), 0.0f);   // Never negative.

  ShardOptions o;
  o.optimizer.kind = OptimizerKind::kAdamW;
  o.schedule.base_lr = 0.01;
  o.staleness.method = StalenessMethod::kMomentum;
  auto store = Store(o);
  // Staleness 0, 1, 2: the running mean (1/32 per observation) before each
  // update is 0, 0, then 1/32.
  ASSERT_TRUE(PushScaled(*store, "a", 1.0f, 0).ok());
  ASSERT_TRUE(PushScaled(*store, "b", -2.0f, 0).ok());
  EXPECT_NEAR(store->recent_staleness(), 1.0 / 32, 1e-12);
  ASSERT_TRUE(PushScaled(*store, "c", 0.5f, 0).ok());
  const double s = 1.0 / 32;
  const std::vector<double> beta1s = {0.9, 0.9, 0.9 - s / (1 + s)};
  std::vector<std::vector<double>> grads(3, std::vector<double>(kN));
  for (int64_t i = 0; i < kN; ++i) {
    grads[0][i] = 1.0 * (i + 1);
    grads[1][i] = -2.0 * (i + 1);
    grads[2][i] = 0.5 * (i + 1);
  }
  const std::vector<double> ref = AdamWReference(grads, beta1s, 0.01);
  const std::vector<double> plain = AdamWReference(grads, {0.9, 0.9, 0.9}, 0.01);
  const std::vector<float> w = Weights(*store);
  for (int64_t i = 0; i < kN; ++i) {
    EXPECT_NEAR(w[i], ref[i], 2e-6) << i;
    EXPECT_GT(std::abs(ref[i] - plain[i]), 1e-5) << i;  // The lowered beta1 shows.
  }
}

TEST(AsyncMomentumTest, LowersSgdMomentumTheSameWay) {
  ShardOptions o = Sgd(0.1);
  o.optimizer.momentum = 0.9f;
  o.staleness.method = StalenessMethod::kMomentum;
  auto store = Store(o);
  ASSERT_TRUE(PushScaled(*store, "a", 1.0f, 0).ok());   // Staleness 0.
  ASSERT_TRUE(PushScaled(*store, "b", -2.0f, 0).ok());  // 1: mean 1/32 after.
  ASSERT_TRUE(PushScaled(*store, "c", 0.5f, 0).ok());
  const double s = 1.0 / 32, mu3 = 0.9 - s / (1 + s);
  const std::vector<float> w = Weights(*store);
  for (int64_t i = 0; i < kN; ++i) {
    const double x = static_cast<double>(i + 1);
    const double buf1 = 1.0 * x, buf2 = 0.9 * buf1 - 2.0 * x, buf3 = mu3 * buf2 + 0.5 * x;
    EXPECT_NEAR(w[i], 1.0 - 0.1 * (buf1 + buf2 + buf3), 2e-6) << i;
  }
}

TEST(WorkerWarmupTest, RampsOverStepsPerWorkerTimesLiveWorkers) {
  ShardOptions o = Sgd(0.1);
  o.staleness.worker_warmup = true;
  o.staleness.warmup_steps_per_worker = 2;
  auto store = Store(o);
  store->SetLiveWorkers(2);  // Warmup over 4 updates: lr x 1/4, 2/4, 3/4, 1, 1.
  float expected = 1.0f;
  const float factors[] = {0.25f, 0.5f, 0.75f, 1.0f, 1.0f};
  for (int t = 0; t < 5; ++t) {
    ASSERT_TRUE(PushScaled(*store, absl::StrCat("p", t), 1.0f, t).ok());
    expected -= 0.1f * factors[t];
    EXPECT_NEAR(Weights(*store)[0], expected, 1e-6) << t;
  }
  // Unknown live workers: 1 + the running mean staleness (here 0) = 1.
  AsyncView view;
  view.updates_done = 0;
  EXPECT_EQ(EstimatedWorkers(view), 1);
  view.mean_staleness = 2.6;
  EXPECT_EQ(EstimatedWorkers(view), 4);
  view.live_workers = 2;
  EXPECT_EQ(EstimatedWorkers(view), 2);
}

}  // namespace
}  // namespace spotps
