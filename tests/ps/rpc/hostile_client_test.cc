// Integrity cases found by a hostile client, each against real shard
// processes on loopback, with raw gRPC stubs where a well-behaved client
// (Cluster, CoordinatorClient) would never send such a request. Every
// refused request must get its precise status and change nothing.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "spotps/v1/coordinator.grpc.pb.h"
#include "ps/coordination/coordinator.h"
#include "ps/store/optimizer.h"
#include "spotps/v1/parameter_server.grpc.pb.h"
#include "tests/support/child_process.h"

namespace spotps {
namespace {

using testing::LocalShardCluster;
using testing::TempDir;

std::unique_ptr<v1::ParameterServer::Stub> ShardStub(int port) {
  return v1::ParameterServer::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
}

std::unique_ptr<v1::Coordinator::Stub> CoordinatorStub(int port) {
  return v1::Coordinator::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                      grpc::InsecureChannelCredentials()));
}

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
}

class HostileClientTest : public ::testing::Test {
 protected:
  // Starts `n` shards (shard 0 with `shard0_flags` too) and initialises a
  // small model of ones through the client library.
  void StartShards(int n, std::vector<std::string> all_flags,
                   std::vector<std::string> shard0_flags = {}) {
    auto shards = LocalShardCluster::Start(
        n,
        [&](int i, const std::string& addresses) {
          std::vector<std::string> f = all_flags;
          if (i == 0) {
            f.insert(f.end(), shard0_flags.begin(), shard0_flags.end());
            if (n > 1) f.push_back("--peers=" + addresses.substr(addresses.find(',') + 1));
          }
          for (std::string& flag : f) {
            if (flag == "--checkpoint_dir=") flag += absl::StrCat(dir_.path(), "/ckpt", i);
          }
          return f;
        },
        dir_.path());
    ASSERT_TRUE(shards.ok()) << shards.status();
    shards_ = *std::move(shards);
    cluster_ = *Cluster::Connect(shards_->addresses());
    layout_ = *ModelLayout::Create({{"w", {64, 32}}, {"b", {32}}});
    ASSERT_TRUE(
        cluster_->Init(layout_, std::vector<float>(layout_.total_elements(), 1.0f)).ok());
  }

  WeightSnapshot Pull() {
    WeightSnapshot w;
    EXPECT_TRUE(cluster_->Pull(v1::DTYPE_FP32, &w).ok());
    return w;
  }

  absl::StatusOr<PushResult> PushAll(float value, const std::vector<uint64_t>& versions,
                                     const std::string& id = "") {
    std::vector<float> g(layout_.total_elements(), value);
    return cluster_->Push(g, versions, v1::DTYPE_FP32, id);
  }

  TempDir dir_;
  std::unique_ptr<LocalShardCluster> shards_;
  std::unique_ptr<Cluster> cluster_;
  ModelLayout layout_;
};

TEST_F(HostileClientTest, OnlyTheLesseeCommitsAndNeverLeasedUnitsAreNoDuplicates) {
  StartShards(1, {"--optimizer=sgd"}, {"--epochs=1", "--units_per_epoch=4"});
  auto coordinator = *CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", shards_->port(0)));
  const uint64_t holder = coordinator->Register("holder")->worker_id();
  const auto grant = coordinator->Acquire(holder);
  ASSERT_TRUE(grant.ok()) << grant.status();
  const v1::WorkUnit unit = grant->unit();
  auto raw = CoordinatorStub(shards_->port(0));

  auto commit = [&](uint64_t worker, uint32_t epoch, uint64_t index) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::CommitUnitRequest request;
    request.set_worker_id(worker);
    request.set_epoch(epoch);
    request.set_index(index);
    v1::CommitUnitResponse response;
    return raw->CommitUnit(&ctx, request, &response).error_code();
  };
  EXPECT_EQ(commit(424242, unit.epoch(), unit.index()), grpc::StatusCode::NOT_FOUND);
  // The holder's id without the key its registration returned.
  EXPECT_EQ(commit(holder, unit.epoch(), unit.index()), grpc::StatusCode::PERMISSION_DENIED);
  // Another registered worker, with its own key, is not the lessee.
  const uint64_t intruder = coordinator->Register("intruder")->worker_id();
  EXPECT_EQ(coordinator->Commit(intruder, unit.epoch(), unit.index()).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(coordinator->Release(intruder, unit.epoch(), unit.index()).code(),
            absl::StatusCode::kPermissionDenied);
  const uint64_t never_leased = (unit.index() + 1) % 4;
  EXPECT_EQ(coordinator->Commit(holder, 0, never_leased).status().code(),
            absl::StatusCode::kFailedPrecondition);
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::ReleaseUnitRequest request;
    request.set_worker_id(424242);
    request.set_epoch(unit.epoch());
    request.set_index(unit.index());
    v1::ReleaseUnitResponse response;
    EXPECT_EQ(raw->ReleaseUnit(&ctx, request, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_EQ(coordinator->Deregister(424242).code(), absl::StatusCode::kNotFound);

  v1::ProgressResponse p = *coordinator->Progress();
  EXPECT_EQ(p.epochs(0).committed(), 0u);
  EXPECT_EQ(p.epochs(0).duplicated(), 0u);
  EXPECT_EQ(p.epochs(0).leased(), 1u);  // Still the holder's.
  EXPECT_FALSE(*coordinator->Commit(holder, unit.epoch(), unit.index()));
  EXPECT_EQ(coordinator->Progress()->epochs(0).committed(), 1u);
}

TEST_F(HostileClientTest, RegistrationsAreCapped) {
  StartShards(1, {"--optimizer=sgd"}, {"--epochs=1", "--units_per_epoch=4", "--max_workers=2"});
  auto coordinator = *CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", shards_->port(0)));
  ASSERT_TRUE(coordinator->Register("a").ok());
  ASSERT_TRUE(coordinator->Register("b").ok());
  EXPECT_EQ(coordinator->Register("c").status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(HostileClientTest, ARetryOfAnAppliedPushIsADuplicateEvenWhenNowTooStale) {
  StartShards(1, {"--optimizer=sgd", "--lr=0.5", "--max_staleness=0"});
  const WeightSnapshot w0 = Pull();
  ASSERT_TRUE(PushAll(1.0f, w0.versions, "first").ok());
  const WeightSnapshot w1 = Pull();
  ASSERT_TRUE(PushAll(1.0f, w1.versions, "second").ok());
  // The first push again, as a retry whose reply was lost: its base
  // versions are 2 behind now, beyond --max_staleness=0.
  absl::StatusOr<PushResult> retry = PushAll(1.0f, w0.versions, "first");
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->duplicate);
  const WeightSnapshot after = Pull();
  EXPECT_EQ(after.values[0], 1.0f - 0.5f - 0.5f);  // Applied twice in all, not three times.
  // A fresh push that stale is still refused.
  EXPECT_EQ(PushAll(1.0f, w0.versions).status().code(), absl::StatusCode::kAborted);
}

TEST_F(HostileClientTest, CheckpointIdsCannotBePushedToTheirWrapAround) {
  StartShards(2, {"--optimizer=sgd", "--checkpoint_dir="},
              {"--epochs=1", "--units_per_epoch=4"});
  auto shard1 = ShardStub(shards_->port(1));
  v1::StatsResponse stats;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    ASSERT_TRUE(shard1->Stats(&ctx, v1::StatsRequest(), &stats).ok());
  }
  auto write = [&](uint64_t id, uint64_t incarnation) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::WriteCheckpointRequest request;
    request.set_checkpoint_id(id);
    request.set_expected_incarnation(incarnation);
    v1::WriteCheckpointResponse response;
    return shard1->WriteCheckpoint(&ctx, request, &response);
  };
  grpc::Status stray = write(~uint64_t{0}, stats.incarnation());
  EXPECT_EQ(stray.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << stray.error_message();
  EXPECT_EQ(write(5, 0).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(write(0, stats.incarnation()).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  auto coordinator = *CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", shards_->port(0)));
  absl::StatusOr<v1::CheckpointNowResponse> first = coordinator->CheckpointNow();
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<v1::CheckpointNowResponse> second = coordinator->CheckpointNow();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->checkpoint_id(), first->checkpoint_id() + 1);
  // Going back is refused too: ids only grow.
  EXPECT_EQ(write(second->checkpoint_id() - 1, stats.incarnation()).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(HostileClientTest, GradientsThatWouldOverflowTheStateAreRefused) {
  StartShards(1, {"--optimizer=adamw", "--lr=0.01"});
  const WeightSnapshot before = Pull();
  // 1e20 squared overflows FP32: AdamW's second moment would become Inf.
  std::vector<float> g(layout_.total_elements(), 0.0f);
  g[3] = 1e20f;
  absl::StatusOr<PushResult> huge = cluster_->Push(g, before.versions, v1::DTYPE_FP32);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument) << huge.status();
  for (int i = 0; i < 3; ++i) {  // Repeated FLT_MAX would drive weights to -Inf.
    EXPECT_EQ(PushAll(FLT_MAX, before.versions).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  const WeightSnapshot after = Pull();
  EXPECT_EQ(after.values, before.values);
  EXPECT_EQ(after.versions, before.versions);
  // The shard still takes ordinary gradients, and its state stays finite.
  ASSERT_TRUE(PushAll(0.5f, before.versions).ok());
  for (float v : Pull().values) ASSERT_TRUE(std::isfinite(v));
}

TEST_F(HostileClientTest, AConditionalPullSendsEveryVersionButTheKnownOne) {
  StartShards(1, {"--optimizer=sgd"});
  const WeightSnapshot w = Pull();
  auto stub = ShardStub(shards_->port(0));
  const uint32_t id = cluster_->partition_map().PartitionsOfShard(0)[0];
  auto pulled = [&](uint64_t known) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::PullRequest request;
    request.set_dtype(v1::DTYPE_FP32);
    request.add_partition_ids(id);
    request.add_known_versions(known);
    auto reader = stub->Pull(&ctx, request);
    v1::PullResponse response;
    int chunks = 0;
    while (reader->Read(&response)) chunks += response.chunks_size();
    EXPECT_TRUE(reader->Finish().ok());
    return chunks > 0;
  };
  EXPECT_FALSE(pulled(w.versions[id]));  // Unchanged: nothing travels.
  // A client that knows a newer version than the shard has (the shard
  // restarted from an older checkpoint) must get the shard's weights.
  EXPECT_TRUE(pulled(w.versions[id] + 5));
  EXPECT_TRUE(pulled(kNoVersion));
}

// Two clients push overlapping parts of one partition (a: [0, 8192) with
// 0.5, b: [4096, 12288) with 1.5); the default "fresh" averages them into
// one update (k = 2). Only carried elements move, each by one optimizer step
// on the mean of the pushes that carried it; the last quarter, which nobody
// pushed, keeps its weight and optimizer state however the optimizer decays.
class PartialAverageTest : public HostileClientTest {
 protected:
  void RunAndCheck(const std::vector<std::string>& optimizer_flags, const OptimizerConfig& config,
                   float lr) {
    std::vector<std::string> flags = optimizer_flags;
    flags.push_back("--average_pushes=2");
    auto shards = LocalShardCluster::Start(1, flags, dir_.path());
    ASSERT_TRUE(shards.ok()) << shards.status();
    shards_ = *std::move(shards);
    // One partition of 16 Ki elements, four tensors of a quarter each.
    layout_ = *ModelLayout::Create({{"q0", {4096}}, {"q1", {4096}}, {"q2", {4096}}, {"q3", {4096}}});
    auto a = *Cluster::Connect(shards_->addresses());
    auto b = *Cluster::Connect(shards_->addresses());
    std::vector<float> w0(layout_.total_elements());
    for (size_t i = 0; i < w0.size(); ++i) w0[i] = 1.0f + 0.001f * static_cast<float>(i % 97);
    ASSERT_TRUE(a->Init(layout_, w0).ok());
    ASSERT_TRUE(b->FetchLayout().ok());
    ASSERT_EQ(a->partition_map().partitions().size(), 1u);
    WeightSnapshot before;
    ASSERT_TRUE(a->Pull(v1::DTYPE_FP32, &before).ok());
    const std::vector<float> half(4096, 0.5f), three_halves(4096, 1.5f);
    // a's push waits for the averaged update, which b's push completes.
    std::thread first([&] {
      auto r = a->PushTensors({{"q0", half}, {"q1", half}}, before.versions, v1::DTYPE_FP32);
      EXPECT_TRUE(r.ok()) << r.status();
    });
    absl::SleepFor(absl::Milliseconds(200));
    auto r = b->PushTensors({{"q1", three_halves}, {"q2", three_halves}}, before.versions,
                            v1::DTYPE_FP32);
    first.join();
    ASSERT_TRUE(r.ok()) << r.status();

    // The expected weights: one update of each carried quarter with the
    // mean of its pushes, by the shard's own optimizer code.
    const Optimizer optimizer(config);
    std::vector<float> want = w0;
    const float means[3] = {0.5f, 1.0f, 1.5f};
    for (int q = 0; q < 3; ++q) {
      std::vector<float> grad(4096, means[q]);
      std::vector<std::vector<float>> state(optimizer.state_slots(), std::vector<float>(4096, 0));
      float* slots[2] = {nullptr, nullptr};
      for (int s = 0; s < optimizer.state_slots(); ++s) slots[s] = state[s].data();
      optimizer.Apply(want.data() + 4096 * q, slots, GradientView{v1::DTYPE_FP32, grad.data()},
                      4096, lr, 1);
    }
    WeightSnapshot after;
    ASSERT_TRUE(a->Pull(v1::DTYPE_FP32, &after).ok());
    EXPECT_EQ(after.versions[0], before.versions[0] + 1);  // One averaged update.
    for (int64_t i = 0; i < layout_.total_elements(); ++i) {
      ASSERT_EQ(after.values[i], want[i]) << "element " << i << " (quarter " << i / 4096 << ")";
    }
    auto stats = a->Stats();
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ((*stats)[0].pushes_applied(), 2u);
    EXPECT_EQ((*stats)[0].global_step(), 1u);
  }
};

TEST_F(PartialAverageTest, AdamWWithWeightDecayMovesOnlyWhatWasPushed) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdamW;
  c.weight_decay = 0.1f;
  RunAndCheck({"--optimizer=adamw", "--lr=0.01", "--weight_decay=0.1"}, c, 0.01f);
}

TEST_F(PartialAverageTest, SgdMomentumMovesOnlyWhatWasPushedByTheMeanOfItsPushes) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kSgd;
  c.momentum = 0.9f;
  c.weight_decay = 0.1f;
  RunAndCheck({"--optimizer=sgd", "--lr=0.01", "--momentum=0.9", "--weight_decay=0.1"}, c,
              0.01f);
}

// Sync rounds average whole gradients: a push that leaves part of the
// shard's partitions out is refused before it is held, so a round can never
// move an element nobody pushed.
TEST_F(HostileClientTest, SyncRoundsRefuseAPartialPush) {
  StartShards(1, {"--optimizer=sgd", "--weight_decay=0.1", "--consistency=sync"},
              {"--epochs=1", "--units_per_epoch=4"});
  const WeightSnapshot before = Pull();
  const std::vector<float> g(64 * 32, 0.5f);
  auto r = cluster_->PushTensors({{"w", g}}, before.versions, v1::DTYPE_FP32);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("of its"), absl::string_view::npos) << r.status();
  const WeightSnapshot after = Pull();
  EXPECT_EQ(after.values, before.values);
  EXPECT_EQ(after.versions, before.versions);
}

// Anyone may report under any worker's id until identities are bound to
// registrations; what a report claims is bounded by what the coordinator
// knows of that worker (units granted to this registration, the tokens per
// unit it registered with), so one absurd report cannot make the worker's
// real reports "go backwards" for good.
TEST_F(HostileClientTest, TrainingReportsCannotClaimMoreThanTheWorkersUnits) {
  StartShards(1, {"--optimizer=sgd"}, {"--epochs=1", "--units_per_epoch=16"});
  auto coordinator = *CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", shards_->port(0)));
  const uint64_t worker = coordinator->Register("victim", /*tokens_per_unit=*/1024)->worker_id();
  for (int i = 0; i < 3; ++i) {
    auto grant = coordinator->Acquire(worker);
    ASSERT_TRUE(grant.ok()) << grant.status();
    ASSERT_EQ(grant->outcome(), v1::AcquireUnitResponse::OUTCOME_UNIT);
  }
  auto report = [&](uint64_t steps, uint64_t tokens) {
    v1::TrainingReportRequest r;
    r.set_worker_id(worker);
    r.set_steps(steps);
    r.set_tokens(tokens);
    r.set_train_loss(2.5);
    r.set_tokens_per_s(1000);
    return coordinator->Report(r).code();
  };
  EXPECT_EQ(report(~uint64_t{0}, 1024), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(report(6, 1024), absl::StatusCode::kInvalidArgument);  // 3 units granted (+2).
  EXPECT_EQ(report(3, 5 * 1024 + 1), absl::StatusCode::kInvalidArgument);
  // Nothing of those was kept: the real reports go on.
  EXPECT_EQ(report(2, 2048), absl::StatusCode::kOk);
  EXPECT_EQ(report(3, 3072), absl::StatusCode::kOk);
  // A registration claiming more tokens per unit than a unit may hold.
  EXPECT_EQ(coordinator->Register("greedy", kMaxTokensPerUnit + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spotps
