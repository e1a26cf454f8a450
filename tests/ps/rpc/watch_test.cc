// The Watch stream against a real gRPC server on loopback: it reports the
// current versions at once and every change after, is bounded in watchers
// and in time, ends on shutdown and on cancel, and refuses bad requests.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "client/cluster.h"
#include "ps/rpc/parameter_server_service.h"

namespace spotps {
namespace {

constexpr int kMaxWatchers = 2;

class WatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ShardOptions o;
    o.optimizer.kind = OptimizerKind::kSgd;
    o.schedule.base_lr = 0.5;
    store_ = *ShardStore::Create(o);
    service_ = std::make_unique<ParameterServerService>(store_.get(), nullptr, 7, nullptr, kMaxWatchers);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    address_ = "127.0.0.1:" + std::to_string(port);
    stub_ = v1::ParameterServer::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
    cluster_ = *Cluster::Connect(address_);
  }
  void TearDown() override {
    service_->StopWatches();
    server_->Shutdown();
  }

  void InitModel() {
    ASSERT_TRUE(cluster_->Init(layout_, std::vector<float>(layout_.total_elements(), 1.0f)).ok());
  }
  void PushOnes() {
    WeightSnapshot w;
    ASSERT_TRUE(cluster_->Pull(v1::DTYPE_FP32, &w).ok());
    ASSERT_TRUE(
        cluster_
            ->Push(std::vector<float>(layout_.total_elements(), 1.0f), w.versions, v1::DTYPE_FP32)
            .ok());
  }

  struct OpenWatch {
    std::unique_ptr<grpc::ClientContext> ctx = std::make_unique<grpc::ClientContext>();
    std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> reader;
  };
  OpenWatch Open(const v1::WatchRequest& request, absl::Duration deadline = absl::Seconds(30)) {
    OpenWatch w;
    w.ctx->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    w.reader = stub_->Watch(w.ctx.get(), request);
    return w;
  }

  ModelLayout layout_ = *ModelLayout::Create({{"w", {300, 200}}, {"b", {7}}});
  std::unique_ptr<ShardStore> store_;
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(WatchTest, ReportsTheCurrentVersionsAtOnceThenEachChange) {
  InitModel();
  OpenWatch w = Open(v1::WatchRequest());
  v1::WatchResponse r;
  ASSERT_TRUE(w.reader->Read(&r));
  ASSERT_EQ(r.partitions_size(), static_cast<int>(store_->owned_partitions().size()));
  for (const auto& p : r.partitions()) EXPECT_EQ(p.version(), 0u);
  EXPECT_EQ(r.incarnation(), 7u);
  for (uint64_t step = 1; step <= 3; ++step) {
    PushOnes();
    ASSERT_TRUE(w.reader->Read(&r));
    for (const auto& p : r.partitions()) EXPECT_EQ(p.version(), step);
    EXPECT_EQ(r.global_step(), step);
  }
  w.ctx->TryCancel();
  EXPECT_EQ(w.reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(WatchTest, AStreamEndsCleanlyAfterItsMaxDuration) {
  InitModel();
  v1::WatchRequest request;
  request.set_max_duration_ms(300);
  const absl::Time start = absl::Now();
  OpenWatch w = Open(request);
  v1::WatchResponse r;
  ASSERT_TRUE(w.reader->Read(&r));
  EXPECT_FALSE(w.reader->Read(&r));
  EXPECT_TRUE(w.reader->Finish().ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_F(WatchTest, WatchersBeyondTheLimitAreRefusedAndACancelledOneFreesItsSlot) {
  InitModel();
  std::vector<OpenWatch> open;
  v1::WatchResponse r;
  for (int i = 0; i < kMaxWatchers; ++i) {
    open.push_back(Open(v1::WatchRequest()));
    ASSERT_TRUE(open.back().reader->Read(&r));  // Admitted: it got its first message.
  }
  OpenWatch refused = Open(v1::WatchRequest());
  EXPECT_FALSE(refused.reader->Read(&r));
  const grpc::Status s = refused.reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();

  open[0].ctx->TryCancel();
  open[0].reader->Finish();
  // The shard notices the cancel within its wait slice (100 ms).
  bool admitted = false;
  for (int attempt = 0; attempt < 50 && !admitted; ++attempt) {
    OpenWatch again = Open(v1::WatchRequest());
    admitted = again.reader->Read(&r);
    again.ctx->TryCancel();
    again.reader->Finish();
    if (!admitted) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(admitted);
  open[1].ctx->TryCancel();
  open[1].reader->Finish();
}

TEST_F(WatchTest, StopWatchesEndsOpenStreamsWithUnavailable) {
  InitModel();
  OpenWatch w = Open(v1::WatchRequest());
  v1::WatchResponse r;
  ASSERT_TRUE(w.reader->Read(&r));
  const absl::Time start = absl::Now();
  service_->StopWatches();
  EXPECT_FALSE(w.reader->Read(&r));
  EXPECT_EQ(w.reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(WatchTest, BadRequestsGetPreciseStatuses) {
  v1::WatchResponse r;
  {
    OpenWatch w = Open(v1::WatchRequest());
    EXPECT_FALSE(w.reader->Read(&r));
    EXPECT_EQ(w.reader->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  InitModel();
  {
    v1::WatchRequest twice;
    twice.add_partition_ids(0);
    twice.add_partition_ids(0);
    OpenWatch w = Open(twice);
    EXPECT_FALSE(w.reader->Read(&r));
    EXPECT_EQ(w.reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    v1::WatchRequest unknown;
    unknown.add_partition_ids(100000);
    OpenWatch w = Open(unknown);
    EXPECT_FALSE(w.reader->Read(&r));
    EXPECT_EQ(w.reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
}

}  // namespace
}  // namespace spotps
