// Integrity cases found by a hostile client, each against real shard
// processes on loopback, with raw gRPC stubs where a well-behaved client
// (Cluster, CoordinatorClient) would never send such a request. Every
// refused request must get its precise status and change nothing.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "spotps/v1/coordinator.grpc.pb.h"
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
  EXPECT_EQ(commit(424242, unit.epoch(), unit.index()), grpc::StatusCode::PERMISSION_DENIED);
  const uint64_t never_leased = (unit.index() + 1) % 4;
  EXPECT_EQ(commit(holder, 0, never_leased), grpc::StatusCode::FAILED_PRECONDITION);
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::ReleaseUnitRequest request;
    request.set_worker_id(424242);
    request.set_epoch(unit.epoch());
    request.set_index(unit.index());
    v1::ReleaseUnitResponse response;
    EXPECT_EQ(raw->ReleaseUnit(&ctx, request, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
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

}  // namespace
}  // namespace spotps
