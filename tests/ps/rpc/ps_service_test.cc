// Every kind of bad request against a real gRPC server on loopback: each gets
// a precise status and changes nothing.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <limits>

#include "common/tensor_codec.h"
#include "ps/rpc/parameter_server_service.h"

namespace spotps {
namespace {

constexpr int kMaxMessageBytes = 2 << 20;

// ParameterServer/Join as `worker`.
grpc::Status Join(v1::ParameterServer::Stub* stub, const std::string& worker,
                  v1::JoinResponse* reply) {
  grpc::ClientContext ctx;
  v1::JoinRequest request;
  request.set_worker_id(worker);
  return stub->Join(&ctx, request, reply);
}

class PsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(SgdShard()); }
  // Shard 0 of 2, so some partitions belong elsewhere.
  static ShardOptions SgdShard() {
    ShardOptions o;
    o.num_shards = 2;
    o.optimizer.kind = OptimizerKind::kSgd;
    o.schedule.base_lr = 0.25;
    return o;
  }
  void Start(const ShardOptions& o) {
    if (server_ != nullptr) server_->Shutdown();
    store_ = *ShardStore::Create(o);
    service_ = std::make_unique<ParameterServerService>(store_.get(), nullptr, 1);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(64 << 20);
    stub_ = v1::ParameterServer::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
    map_ = *PartitionMap::Create(layout_, 2);
    own_ = map_.PartitionsOfShard(0);
    other_ = map_.PartitionsOfShard(1);
  }
  void TearDown() override { server_->Shutdown(); }

  grpc::Status SendInit(const v1::InitRequest& header, const std::vector<v1::InitRequest>& rest,
                        v1::InitResponse* out = nullptr) {
    grpc::ClientContext ctx;
    v1::InitResponse ignored;
    v1::InitResponse& reply = out != nullptr ? *out : ignored;
    auto writer = stub_->Init(&ctx, &reply);
    writer->Write(header);
    for (const auto& m : rest) writer->Write(m);
    writer->WritesDone();
    return writer->Finish();
  }

  v1::InitRequest InitHeader() {
    v1::InitRequest h;
    *h.mutable_layout() = layout_.ToProto();
    h.set_num_shards(2);
    h.set_shard_index(0);
    return h;
  }

  void AddChunk(google::protobuf::RepeatedPtrField<v1::PartitionChunk>* chunks, uint32_t id,
                uint64_t offset, const std::vector<float>& values, v1::DType dtype,
                uint64_t version = 0) {
    v1::PartitionChunk* c = chunks->Add();
    c->set_partition_id(id);
    c->set_offset(offset);
    c->set_version(version);
    AppendEncoded(values.data(), values.size(), dtype, c->mutable_data());
  }

  std::vector<float> Fill(uint32_t id, float value) {
    return std::vector<float>(map_.partitions()[id].num_elements, value);
  }

  void InitValid() {
    v1::InitRequest h = InitHeader();
    for (uint32_t id : own_) AddChunk(h.mutable_chunks(), id, 0, Fill(id, 1.0f), v1::DTYPE_FP32);
    ASSERT_TRUE(SendInit(h, {}).ok());
  }

  // A valid whole-shard BF16 gradient push, to mutate into bad ones.
  v1::PushRequest GoodPush(float value = 1.0f) {
    v1::PushRequest p;
    p.set_push_id("p-" + std::to_string(next_id_++));
    p.set_dtype(v1::DTYPE_BF16);
    for (uint32_t id : own_) {
      AddChunk(p.mutable_chunks(), id, 0, Fill(id, value), v1::DTYPE_BF16);
      v1::PartitionCount* count = p.add_announced();
      count->set_partition_id(id);
      count->set_num_elements(map_.partitions()[id].num_elements);
    }
    return p;
  }

  // "fresh" with no tick running (as spotps-ps runs one): only an update
  // that has every live worker's push applies. Initialized.
  void StartFreshWithoutTicks() {
    ShardOptions o = SgdShard();
    ASSERT_TRUE(ParseStalenessSpec("fresh", &o.staleness).ok());
    o.staleness.average_wait_ms = 60'000;
    Start(o);
    InitValid();
  }
  // A valid push of ones, named `worker`.
  grpc::Status PushAs(const std::string& worker) {
    v1::PushRequest p = GoodPush(1.0f);
    p.set_worker_id(worker);
    return SendPush({p});
  }

  // PushAs on a thread of its own, for a push that waits for its update.
  std::future<grpc::Status> PushAsync(const std::string& worker) {
    return std::async(std::launch::async, [this, worker] { return PushAs(worker); });
  }
  // ParameterServer/Join for each of `workers`; true if every one succeeded.
  bool JoinAll(std::initializer_list<const char*> workers) {
    for (const char* worker : workers) {
      v1::JoinResponse reply;
      if (!Join(stub_.get(), worker, &reply).ok()) return false;
    }
    return true;
  }

  grpc::Status SendPush(const std::vector<v1::PushRequest>& messages) {
    grpc::ClientContext ctx;
    v1::PushResponse reply;
    auto writer = stub_->Push(&ctx, &reply);
    for (const auto& m : messages) {
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status SendPull(const v1::PullRequest& request, std::vector<v1::PullResponse>* out) {
    grpc::ClientContext ctx;
    auto reader = stub_->Pull(&ctx, request);
    v1::PullResponse r;
    while (reader->Read(&r)) out->push_back(r);
    return reader->Finish();
  }

  v1::StatsResponse Stats() {
    grpc::ClientContext ctx;
    v1::StatsResponse stats;
    EXPECT_TRUE(stub_->Stats(&ctx, v1::StatsRequest(), &stats).ok());
    return stats;
  }

  // Waits (up to 5 s) until the pushes the shard took add up to `at_least`
  // bytes, and returns their bytes: a push is held once they count.
  uint64_t AwaitBytesIn(uint64_t at_least) {
    for (int i = 0; i < 500 && Stats().bytes_in() < at_least; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    return Stats().bytes_in();
  }

  // No state changed: nothing applied, every owned value still 1.
  void ExpectUntouched() {
    const v1::StatsResponse stats = Stats();
    EXPECT_EQ(stats.global_step(), 0u);
    EXPECT_EQ(stats.pushes_applied(), 0u);
    for (const auto& p : stats.partitions()) EXPECT_EQ(p.version(), 0u);
    for (uint32_t id : own_) {
      std::string bytes;
      ASSERT_TRUE(store_->Read(id, v1::DTYPE_FP32, &bytes).ok());
      std::vector<float> v(bytes.size() / 4);
      DecodeToFp32(v1::DTYPE_FP32, bytes, v.size(), v.data()).IgnoreError();
      for (float x : v) ASSERT_EQ(x, 1.0f);
    }
  }

  static void ExpectStatus(const grpc::Status& s, grpc::StatusCode code, const std::string& words) {
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_NE(s.error_message().find(words), std::string::npos)
        << "message '" << s.error_message() << "' lacks '" << words << "'";
  }

  ModelLayout layout_ = *ModelLayout::Create({{"w", {300'000}}, {"b", {10}}});
  PartitionMap map_;
  std::vector<uint32_t> own_, other_;
  std::unique_ptr<ShardStore> store_;
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
  int next_id_ = 0;
};

TEST_F(PsServiceTest, RequestsBeforeInitAreFailedPrecondition) {
  std::vector<v1::PullResponse> out;
  v1::PullRequest pull;
  pull.set_dtype(v1::DTYPE_BF16);
  ExpectStatus(SendPull(pull, &out), grpc::StatusCode::FAILED_PRECONDITION, "not initialised");
  ExpectStatus(SendPush({GoodPush()}), grpc::StatusCode::FAILED_PRECONDITION, "not initialised");
}

TEST_F(PsServiceTest, BadInitsAreRefused) {
  v1::InitRequest wrong_shards = InitHeader();
  wrong_shards.set_num_shards(3);
  ExpectStatus(SendInit(wrong_shards, {}), grpc::StatusCode::FAILED_PRECONDITION, "shard 0 of 3");

  v1::InitRequest dup = InitHeader();
  *dup.mutable_layout()->add_tensors() = dup.layout().tensors(0);
  ExpectStatus(SendInit(dup, {}), grpc::StatusCode::INVALID_ARGUMENT, "duplicate tensor name");

  v1::InitRequest missing = InitHeader();
  AddChunk(missing.mutable_chunks(), own_[0], 0, Fill(own_[0], 1.0f), v1::DTYPE_FP32);
  ExpectStatus(SendInit(missing, {}), grpc::StatusCode::INVALID_ARGUMENT, "missing");

  v1::InitRequest nan = InitHeader();
  for (uint32_t id : own_) {
    std::vector<float> v = Fill(id, 1.0f);
    v[3] = std::nanf("");
    AddChunk(nan.mutable_chunks(), id, 0, v, v1::DTYPE_FP32);
  }
  ExpectStatus(SendInit(nan, {}), grpc::StatusCode::INVALID_ARGUMENT, "NaN or Inf");

  EXPECT_FALSE(store_->initialized());
  InitValid();
  ExpectUntouched();
  // Same layout again: fine. Another layout: refused.
  InitValid();
  v1::InitRequest other = InitHeader();
  other.mutable_layout()->mutable_tensors(1)->set_shape(0, 11);
  ExpectStatus(SendInit(other, {}), grpc::StatusCode::FAILED_PRECONDITION, "different model");
  ExpectUntouched();
}

// A client whose Init landed but whose reply was lost retries it with the
// same init_id and learns that its values were kept; any other Init of the
// same layout is told they were not, and changes nothing.
TEST_F(PsServiceTest, AnInitRetryLearnsThatItsFirstAttemptLanded) {
  auto init = [&](const std::string& id, float value) {
    v1::InitRequest h = InitHeader();
    h.set_init_id(id);
    for (uint32_t p : own_) AddChunk(h.mutable_chunks(), p, 0, Fill(p, value), v1::DTYPE_FP32);
    v1::InitResponse reply;
    grpc::Status s = SendInit(h, {}, &reply);
    EXPECT_TRUE(s.ok()) << id << ": " << s.error_message();
    return reply.applied();
  };
  v1::InitRequest long_id = InitHeader();
  long_id.set_init_id(std::string(129, 'x'));
  ExpectStatus(SendInit(long_id, {}), grpc::StatusCode::INVALID_ARGUMENT,
               "init_id has 129 bytes, more than 128");
  EXPECT_FALSE(store_->initialized());

  EXPECT_TRUE(init("client-a-1", 1.0f));
  EXPECT_TRUE(init("client-a-1", 2.0f));  // The retry: told it was kept.
  EXPECT_FALSE(init("client-b-1", 3.0f));
  EXPECT_FALSE(init("", 4.0f));
  ExpectStatus(SendInit(long_id, {}), grpc::StatusCode::INVALID_ARGUMENT, "init_id");
  ExpectUntouched();  // The first attempt's values, 1.0.
}

TEST_F(PsServiceTest, BadPushesAreRefusedAndChangeNothing) {
  InitValid();
  struct BadPush {
    std::string what;
    std::function<void(v1::PushRequest*)> mutate;
    grpc::StatusCode code;
    std::string words;
  };
  const uint32_t own = own_[0];
  const std::vector<BadPush> cases = {
      {"unknown partition", [](v1::PushRequest* p) { p->mutable_chunks(0)->set_partition_id(999); },
       grpc::StatusCode::NOT_FOUND, "does not exist"},
      {"another shard's partition",
       [&](v1::PushRequest* p) { p->mutable_chunks(0)->set_partition_id(other_[0]); },
       grpc::StatusCode::INVALID_ARGUMENT, "belongs to shard 1"},
      {"odd byte count",
       [](v1::PushRequest* p) { p->mutable_chunks(0)->mutable_data()->pop_back(); },
       grpc::StatusCode::INVALID_ARGUMENT, "not a positive multiple"},
      {"overrun", [](v1::PushRequest* p) { p->mutable_chunks(0)->set_offset(8); },
       grpc::StatusCode::INVALID_ARGUMENT, "overruns"},
      {"huge offset", [](v1::PushRequest* p) { p->mutable_chunks(0)->set_offset(~0ull - 1); },
       grpc::StatusCode::INVALID_ARGUMENT, "overruns"},
      {"no dtype", [](v1::PushRequest* p) { p->set_dtype(v1::DTYPE_UNSPECIFIED); },
       grpc::StatusCode::INVALID_ARGUMENT, "unsupported gradient dtype"},
      {"unknown dtype", [](v1::PushRequest* p) { p->set_dtype(static_cast<v1::DType>(42)); },
       grpc::StatusCode::INVALID_ARGUMENT, "unsupported gradient dtype"},
      {"NaN",
       [&](v1::PushRequest* p) {
         std::vector<float> v = Fill(own, 1.0f);
         v[10] = std::nanf("");
         p->mutable_chunks()->RemoveLast();
         AddChunk(p->mutable_chunks(), own_.back(), 0, v, v1::DTYPE_BF16);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "NaN or Inf"},
      {"Inf",
       [&](v1::PushRequest* p) {
         std::vector<float> v = Fill(own, 1.0f);
         v[0] = -std::numeric_limits<float>::infinity();
         p->mutable_chunks(0)->clear_data();
         AppendEncoded(v.data(), v.size(), v1::DTYPE_BF16, p->mutable_chunks(0)->mutable_data());
       },
       grpc::StatusCode::INVALID_ARGUMENT, "NaN or Inf"},
      {"version from the future", [](v1::PushRequest* p) { p->mutable_chunks(0)->set_version(5); },
       grpc::StatusCode::OUT_OF_RANGE, "from the future"},
      {"empty push id", [](v1::PushRequest* p) { p->clear_push_id(); },
       grpc::StatusCode::INVALID_ARGUMENT, "push_id"},
      {"NaN gradient_scale", [](v1::PushRequest* p) { p->set_gradient_scale(std::nanf("")); },
       grpc::StatusCode::INVALID_ARGUMENT, "gradient_scale is nan"},
      {"gradient_scale above 1", [](v1::PushRequest* p) { p->set_gradient_scale(2.0f); },
       grpc::StatusCode::INVALID_ARGUMENT, "at most 1"},
      {"negative gradient_scale", [](v1::PushRequest* p) { p->set_gradient_scale(-0.5f); },
       grpc::StatusCode::INVALID_ARGUMENT, "above 0"},
      {"overlapping chunks",
       [&](v1::PushRequest* p) {
         v1::PartitionChunk* second = p->mutable_chunks(1);
         second->set_partition_id(p->chunks(0).partition_id());
         second->set_offset(1);
         second->mutable_data()->resize(4);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "overlapping"},
  };
  for (const BadPush& c : cases) {
    SCOPED_TRACE(c.what);
    v1::PushRequest p = GoodPush();
    c.mutate(&p);
    ExpectStatus(SendPush({p}), c.code, c.words);
    ExpectUntouched();
  }
}

TEST_F(PsServiceTest, AGradientScaleInTwoMessagesIsRefused) {
  InitValid();
  v1::PushRequest first = GoodPush();
  first.set_gradient_scale(0.5f);
  // The rest of the payload in a second message, which sets it again.
  v1::PushRequest second;
  *second.add_chunks() = first.chunks(first.chunks_size() - 1);
  first.mutable_chunks()->RemoveLast();
  second.set_gradient_scale(0.5f);
  ExpectStatus(SendPush({first, second}), grpc::StatusCode::INVALID_ARGUMENT,
               "gradient_scale in more than one message");
  ExpectUntouched();
  // Set once, in the last message: applied as the gradient times 0.5.
  second.clear_gradient_scale();
  first.clear_gradient_scale();
  second.set_gradient_scale(0.5f);
  ASSERT_TRUE(SendPush({first, second}).ok());
  std::string bytes;
  ASSERT_TRUE(store_->Read(own_[0], v1::DTYPE_FP32, &bytes).ok());
  float w0 = 0;
  ASSERT_TRUE(DecodeToFp32(v1::DTYPE_FP32, bytes.substr(0, 4), 1, &w0).ok());
  EXPECT_EQ(w0, 1.0f - 0.25f * 0.5f);  // lr 0.25, gradient 1 x 0.5.
}

// The clients that push count as live workers until they Leave (or fall
// silent); a bad Leave is refused.
TEST_F(PsServiceTest, APusherCountsUntilItLeaves) {
  InitValid();
  auto live = [this] { return Stats().live_pushers(); };
  auto leave = [this](const std::string& worker, v1::LeaveResponse* reply) {
    grpc::ClientContext ctx;
    v1::LeaveRequest request;
    request.set_worker_id(worker);
    return stub_->Leave(&ctx, request, reply);
  };
  EXPECT_EQ(live(), 0u);
  for (const char* worker : {"trainer-a", "trainer-b"}) {
    v1::PushRequest p = GoodPush();
    p.set_worker_id(worker);
    ASSERT_TRUE(SendPush({p}).ok());
  }
  EXPECT_EQ(live(), 2u);
  v1::LeaveResponse reply;
  ASSERT_TRUE(leave("trainer-a", &reply).ok());
  EXPECT_TRUE(reply.known());
  EXPECT_EQ(live(), 1u);
  ASSERT_TRUE(leave("trainer-a", &reply).ok());
  EXPECT_FALSE(reply.known());
  ExpectStatus(leave("", &reply), grpc::StatusCode::INVALID_ARGUMENT, "worker_id of 0 bytes");
  ExpectStatus(leave(std::string(129, 'x'), &reply), grpc::StatusCode::INVALID_ARGUMENT,
               "want 1 to 128");
  EXPECT_EQ(live(), 1u);
}

// Under "fresh", trainers that Join before the shard's first update all
// count: the first update waits for every one of their first gradients
// rather than applying whichever arrived first alone. Once an update is
// applied, a Join changes nothing (a joiner counts from its first push).
TEST_F(PsServiceTest, TheFirstFreshUpdateWaitsForEveryTrainerThatJoined) {
  StartFreshWithoutTicks();
  v1::JoinResponse reply;
  for (const char* worker : {"trainer-a", "trainer-b"}) {
    ASSERT_TRUE(Join(stub_.get(), worker, &reply).ok());
    EXPECT_TRUE(reply.counted());
  }
  EXPECT_EQ(Stats().live_pushers(), 2u);
  EXPECT_EQ(Stats().average_target(), 2u);
  std::future<grpc::Status> a = PushAsync("trainer-a");
  // trainer-a's push is held (its bytes counted), and not applied alone.
  for (int i = 0; i < 500 && Stats().bytes_in() == 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_GT(Stats().bytes_in(), 0u);
  EXPECT_EQ(Stats().global_step(), 0u);
  EXPECT_EQ(a.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  ASSERT_TRUE(PushAs("trainer-b").ok());
  ASSERT_TRUE(a.get().ok());
  EXPECT_EQ(Stats().global_step(), 1u);  // One update held both.
  EXPECT_EQ(Stats().pushes_applied(), 2u);

  ASSERT_TRUE(Join(stub_.get(), "trainer-c", &reply).ok());
  EXPECT_FALSE(reply.counted());
  EXPECT_EQ(Stats().live_pushers(), 2u);
  ExpectStatus(Join(stub_.get(), "", &reply), grpc::StatusCode::INVALID_ARGUMENT,
               "join names a worker_id of 0 bytes");
  ExpectStatus(Join(stub_.get(), std::string(129, 'x'), &reply), grpc::StatusCode::INVALID_ARGUMENT,
               "want 1 to 128");
}

// A trainer that leaves (a drain) frees the "fresh" update that waits only
// for its push: the others' pushes are applied at once, not after
// --average_wait_ms.
TEST_F(PsServiceTest, ATrainerLeavingFreesTheFreshUpdateWaitingForIt) {
  StartFreshWithoutTicks();
  ASSERT_TRUE(JoinAll({"trainer-a", "trainer-b", "trainer-c"}));
  std::future<grpc::Status> a = PushAsync("trainer-a");
  const uint64_t one_push = AwaitBytesIn(1);
  ASSERT_GT(one_push, 0u);
  std::future<grpc::Status> b = PushAsync("trainer-b");
  ASSERT_GE(AwaitBytesIn(2 * one_push), 2 * one_push);
  EXPECT_EQ(b.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  EXPECT_EQ(Stats().global_step(), 0u);  // Held for trainer-c.
  grpc::ClientContext ctx;
  v1::LeaveRequest leave;
  leave.set_worker_id("trainer-c");
  v1::LeaveResponse left;
  ASSERT_TRUE(stub_->Leave(&ctx, leave, &left).ok());
  ASSERT_EQ(a.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_EQ(b.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(a.get().ok());
  EXPECT_TRUE(b.get().ok());
  EXPECT_EQ(Stats().global_step(), 1u);  // One update, both pushes.
  EXPECT_EQ(Stats().pushes_applied(), 2u);
}

// A worker's first push after the job began (a replacement's) waits for
// the update after the open one, which it is counted in from that push on;
// joined to the open one it could close it on one shard and open the next
// on another (averaged_updates.h).
TEST_F(PsServiceTest, ANewWorkersFirstPushWaitsForTheFreshUpdateAfterTheOpenOne) {
  StartFreshWithoutTicks();
  ASSERT_TRUE(JoinAll({"trainer-a", "trainer-b"}));
  std::future<grpc::Status> a = PushAsync("trainer-a");
  const uint64_t one_push = AwaitBytesIn(1);
  ASSERT_GT(one_push, 0u);
  std::future<grpc::Status> n = PushAsync("trainer-new");
  ASSERT_GE(AwaitBytesIn(2 * one_push), 2 * one_push);
  EXPECT_EQ(Stats().live_pushers(), 3u);  // Counted with its push, not at a tick.
  EXPECT_EQ(Stats().global_step(), 0u);
  ASSERT_TRUE(PushAs("trainer-b").ok());  // Completes the open update without it.
  ASSERT_EQ(a.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(a.get().ok());
  EXPECT_EQ(Stats().global_step(), 1u);
  EXPECT_EQ(Stats().pushes_applied(), 2u);
  EXPECT_EQ(n.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  // The next update holds all three.
  std::future<grpc::Status> a2 = PushAsync("trainer-a");
  ASSERT_TRUE(PushAs("trainer-b").ok());
  ASSERT_EQ(n.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(n.get().ok());
  EXPECT_TRUE(a2.get().ok());
  EXPECT_EQ(Stats().global_step(), 2u);
  EXPECT_EQ(Stats().pushes_applied(), 5u);
  EXPECT_EQ(Stats().averaged_updates_waited_out(), 0u);

  // A push the shard refuses counts no new worker.
  v1::PushRequest refused = GoodPush();
  refused.set_worker_id("invented");
  refused.set_gradient_scale(2.0f);
  ExpectStatus(SendPush({refused}), grpc::StatusCode::INVALID_ARGUMENT, "gradient_scale");
  EXPECT_EQ(Stats().live_pushers(), 3u);
}

// A trainer killed while its push waits for its "fresh" update is seen by
// its broken presence stream; it stops counting, and so does its held
// push: the update still waits for every live trainer's push rather than
// closing without one of them (averaged_updates.h says why).
TEST_F(PsServiceTest, APushOfATrainerWhosePresenceBrokeCompletesNoUpdate) {
  StartFreshWithoutTicks();
  ASSERT_TRUE(JoinAll({"trainer-a", "trainer-b", "trainer-dead"}));
  grpc::ClientContext presence;
  v1::PresenceRequest attend;
  attend.set_worker_id("trainer-dead");
  auto stream = stub_->Attend(&presence, attend);
  v1::PresenceResponse held;
  ASSERT_TRUE(stream->Read(&held));
  std::future<grpc::Status> a = PushAsync("trainer-a");
  const uint64_t one_push = AwaitBytesIn(1);
  ASSERT_GT(one_push, 0u);
  std::future<grpc::Status> dead = PushAsync("trainer-dead");
  ASSERT_GE(AwaitBytesIn(2 * one_push), 2 * one_push);
  presence.TryCancel();  // As a kill -9 would break it.
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  for (int i = 0; i < 500 && Stats().live_pushers() != 2; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(Stats().live_pushers(), 2u);
  EXPECT_EQ(Stats().average_target(), 2u);
  EXPECT_EQ(a.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  EXPECT_EQ(Stats().global_step(), 0u) << "the update closed without trainer-b's push";
  ASSERT_TRUE(PushAs("trainer-b").ok());
  ASSERT_EQ(a.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_EQ(dead.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(a.get().ok());
  EXPECT_TRUE(dead.get().ok());
  EXPECT_EQ(Stats().global_step(), 1u);  // One update, all three pushes.
  EXPECT_EQ(Stats().pushes_applied(), 3u);
  EXPECT_EQ(Stats().averaged_updates_waited_out(), 0u);
}

// A unit trained again after its trainer died having pushed it: its push
// is a duplicate, which stands in for its sender's push in the open
// "fresh" update and is answered with that update, as a push would be;
// the update does not wait out the wait for another push of it.
TEST_F(PsServiceTest, ADuplicatePushStandsInForItsSendersPushInTheFreshUpdate) {
  StartFreshWithoutTicks();
  ASSERT_TRUE(JoinAll({"trainer-a", "trainer-b"}));
  auto push = [this](const std::string& worker, const std::string& id) {
    v1::PushRequest p = GoodPush(1.0f);
    p.set_worker_id(worker);
    p.set_push_id(id);
    grpc::ClientContext ctx;
    v1::PushResponse reply;
    auto writer = stub_->Push(&ctx, &reply);
    writer->Write(p);
    writer->WritesDone();
    EXPECT_TRUE(writer->Finish().ok());
    return reply;
  };
  std::future<v1::PushResponse> a = std::async(std::launch::async, push, "trainer-a", "unit-1");
  ASSERT_GT(AwaitBytesIn(1), 0u);
  EXPECT_FALSE(push("trainer-b", "unit-2").duplicate());
  EXPECT_FALSE(a.get().duplicate());
  ASSERT_EQ(Stats().global_step(), 1u);

  // trainer-b trains unit-1 again: its push stands in, and waits for its update.
  std::future<v1::PushResponse> again = std::async(std::launch::async, push, "trainer-b", "unit-1");
  for (int i = 0; i < 500 && Stats().pushes_duplicate() == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(Stats().pushes_duplicate(), 1u);
  EXPECT_EQ(again.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  EXPECT_FALSE(push("trainer-a", "unit-3").duplicate());
  ASSERT_EQ(again.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(again.get().duplicate());
  EXPECT_EQ(Stats().global_step(), 2u);
  EXPECT_EQ(Stats().pushes_applied(), 3u);
  EXPECT_EQ(Stats().averaged_updates_waited_out(), 0u);
}

// A push stream cut off mid-way (its client killed) stops the client
// counting at once, not after its silence (10 s after a single push).
TEST_F(PsServiceTest, APushCutOffMidStreamStopsItsClientCounting) {
  InitValid();
  v1::PushRequest p = GoodPush();
  p.set_worker_id("trainer-a");
  auto live = [this] { return Stats().live_pushers(); };
  // The shard can only forget a client whose first message it has read; a
  // cancel that overtakes that message leaves it unnamed, so try again.
  bool forgotten = false;
  int pushes = 0;
  for (int attempt = 0; attempt < 5 && !forgotten; ++attempt) {
    ASSERT_TRUE(SendPush({p}).ok());
    ++pushes;
    ASSERT_EQ(live(), 1u);
    grpc::ClientContext ctx;
    v1::PushResponse reply;
    auto writer = stub_->Push(&ctx, &reply);
    v1::PushRequest first = p;
    first.mutable_chunks()->RemoveLast();  // The rest never comes.
    ASSERT_TRUE(writer->Write(first));
    absl::SleepFor(absl::Milliseconds(100));
    ctx.TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
    const absl::Time give_up = absl::Now() + absl::Seconds(1);
    while (live() != 0 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(10));
    forgotten = live() == 0;
  }
  EXPECT_TRUE(forgotten) << "the client still counts after its push was cut off";
  EXPECT_EQ(Stats().pushes_applied(), static_cast<uint64_t>(pushes));  // Cut-off pushes: nothing.
}

TEST_F(PsServiceTest, OversizedMessagesAndFloodsAreCutOff) {
  InitValid();
  // One message above the server's receive limit.
  v1::PushRequest big = GoodPush();
  big.mutable_chunks(0)->mutable_data()->append(kMaxMessageBytes, '\0');
  EXPECT_EQ(SendPush({big}).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Many legal-sized messages adding up to more than the shard holds.
  std::vector<v1::PushRequest> flood(3, GoodPush());
  ExpectStatus(SendPush(flood), grpc::StatusCode::RESOURCE_EXHAUSTED,
               "payload bytes its first message announced");
  ExpectUntouched();
}

TEST_F(PsServiceTest, BadPullsAreRefused) {
  InitValid();
  std::vector<v1::PullResponse> out;
  v1::PullRequest bad_dtype;
  ExpectStatus(SendPull(bad_dtype, &out), grpc::StatusCode::INVALID_ARGUMENT, "dtype");
  v1::PullRequest unknown;
  unknown.set_dtype(v1::DTYPE_FP32);
  unknown.add_partition_ids(12345);
  ExpectStatus(SendPull(unknown, &out), grpc::StatusCode::NOT_FOUND, "does not exist");
  v1::PullRequest mismatch;
  mismatch.set_dtype(v1::DTYPE_FP32);
  mismatch.add_partition_ids(own_[0]);
  mismatch.add_known_versions(0);
  mismatch.add_known_versions(0);
  ExpectStatus(SendPull(mismatch, &out), grpc::StatusCode::INVALID_ARGUMENT, "known versions");
  v1::PullRequest min_mismatch;
  min_mismatch.set_dtype(v1::DTYPE_FP32);
  min_mismatch.add_partition_ids(own_[0]);
  min_mismatch.add_min_versions(1);
  min_mismatch.add_min_versions(1);
  ExpectStatus(SendPull(min_mismatch, &out), grpc::StatusCode::INVALID_ARGUMENT,
               "minimum versions");
  EXPECT_TRUE(out.empty());
}

TEST_F(PsServiceTest, GoodPushAppliesAndConditionalPullSendsOnlyChanges) {
  InitValid();
  ASSERT_TRUE(SendPush({GoodPush(2.0f)}).ok());  // w = 1 - 0.25 * 2.
  v1::PullRequest pull;
  pull.set_dtype(v1::DTYPE_BF16);
  std::vector<v1::PullResponse> out;
  ASSERT_TRUE(SendPull(pull, &out).ok());
  ASSERT_EQ(out.size(), own_.size());
  for (const auto& r : out) {
    EXPECT_EQ(r.chunks(0).version(), 1u);
    const auto* h = reinterpret_cast<const uint16_t*>(r.chunks(0).data().data());
    EXPECT_EQ(Bf16ToFloat(h[0]), 0.5f);
  }
  v1::PullRequest conditional;
  conditional.set_dtype(v1::DTYPE_BF16);
  for (uint32_t id : own_) {
    conditional.add_partition_ids(id);
    conditional.add_known_versions(id == own_[0] ? 0 : 1);
  }
  out.clear();
  ASSERT_TRUE(SendPull(conditional, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].chunks(0).partition_id(), own_[0]);
}

TEST_F(PsServiceTest, AnAsyncShardRefusesSyncRounds) {
  InitValid();
  grpc::ClientContext ctx;
  v1::ApplyRoundRequest request;
  request.add_push_ids("p-0");
  v1::ApplyRoundResponse reply;
  ExpectStatus(stub_->ApplyRound(&ctx, request, &reply), grpc::StatusCode::FAILED_PRECONDITION,
               "--consistency=sync");
  ExpectUntouched();
}

}  // namespace
}  // namespace spotps
