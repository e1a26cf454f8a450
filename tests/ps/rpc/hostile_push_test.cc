// A hostile client against a real shard process: streams cut off in every way
// gRPC can end them, floods of empty chunks and messages, bytes that do not
// parse, and inits of another model. Each gets a precise status and changes
// nothing: no weight, version, counter or remembered push id.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/atomic_file.h"
#include "common/int8_blocks.h"
#include "common/partition_map.h"
#include "common/tensor_codec.h"
#include "common/transport_args.h"
#include "spotps/v1/parameter_server.grpc.pb.h"
#include "tests/support/child_process.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;
using testing::LocalShardCluster;
using testing::TempDir;

constexpr double kLr = 0.0625;  // A power of two: the update below is exact.
constexpr float kInitial = 1.0f;
constexpr float kGradient = 2.0f;
constexpr int kMaxMessageMb = 1;  // The shard's --max_message_mb.

// The shard handles a stream broken on the client's side a moment after the
// client saw it end; give it that moment before looking at its state.
void LetTheShardSettle() { absl::SleepFor(absl::Milliseconds(300)); }

grpc::ByteBuffer Bytes(const std::string& s) {
  grpc::Slice slice(s);
  return grpc::ByteBuffer(&slice, 1);
}

// Bytes no protobuf parser accepts: a field tag with wire type 7.
const std::string kUnparseable("\x0f\x0f\x0f\x0f", 4);

// Peak resident memory of process `pid`, in KiB.
int64_t PeakRssKib(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t kib = 0;
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kib)) return kib;
  }
  return -1;
}

void ExpectStatus(const grpc::Status& s, grpc::StatusCode code, const std::string& words) {
  EXPECT_EQ(s.error_code(), code) << s.error_message();
  EXPECT_NE(s.error_message().find(words), std::string::npos)
      << "message '" << s.error_message() << "' lacks '" << words << "'";
}

class HostilePushTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto shards = LocalShardCluster::Start(1,
                                           {"--optimizer=sgd", absl::StrCat("--lr=", kLr),
                                            absl::StrCat("--max_message_mb=", kMaxMessageMb)},
                                           dir_.path());
    ASSERT_TRUE(shards.ok()) << shards.status();
    shards_ = *std::move(shards);
    map_ = *PartitionMap::Create(layout_, 1);
    ASSERT_GE(map_.partitions().size(), 2u);
    n_ = map_.partitions()[0].num_elements;
    stub_ = v1::ParameterServer::NewStub(NewChannel());

    v1::InitRequest init = InitHeader(layout_);
    for (const Partition& p : map_.partitions()) {
      AddChunk(init.mutable_chunks(), p.id, 0, p.num_elements, kInitial);
    }
    grpc::ClientContext ctx;
    v1::InitResponse reply;
    auto writer = stub_->Init(&ctx, &reply);
    ASSERT_TRUE(writer->Write(init));
    ASSERT_TRUE(writer->WritesDone());
    ASSERT_TRUE(writer->Finish().ok());
    ASSERT_TRUE(reply.applied());
  }

  // Its own connection, so that one test client's broken stream cannot
  // disturb the next client's view of the shard.
  std::shared_ptr<grpc::Channel> NewChannel() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxSendMessageSize(64 << 20);
    return grpc::CreateCustomChannel(shards_->addresses(), grpc::InsecureChannelCredentials(),
                                     args);
  }

  static v1::InitRequest InitHeader(const ModelLayout& layout) {
    v1::InitRequest h;
    *h.mutable_layout() = layout.ToProto();
    h.set_num_shards(1);
    h.set_shard_index(0);
    return h;
  }

  static void AddChunk(google::protobuf::RepeatedPtrField<v1::PartitionChunk>* chunks, uint32_t id,
                       int64_t offset, int64_t n, float value) {
    v1::PartitionChunk* c = chunks->Add();
    c->set_partition_id(id);
    c->set_offset(offset);
    const std::vector<float> values(n, value);
    AppendEncoded(values.data(), values.size(), v1::DTYPE_FP32, c->mutable_data());
  }

  // An int8 chunk of partition `id`: `values` at `offset`.
  static void AddInt8Chunk(google::protobuf::RepeatedPtrField<v1::PartitionChunk>* chunks,
                           uint32_t id, int64_t offset, const std::vector<float>& values) {
    v1::PartitionChunk* c = chunks->Add();
    c->set_partition_id(id);
    c->set_offset(offset);
    const int64_t n = static_cast<int64_t>(values.size());
    c->mutable_data()->resize(Int8PayloadBytes(offset, n));
    EncodeInt8Blocks(values.data(), offset, n, c->mutable_data()->data());
  }
  // A whole int8 push of partition 0 in two messages, split at element
  // `split` (not a block border, so one block goes out as two pieces).
  std::vector<v1::PushRequest> Int8Push(const std::string& push_id, const std::vector<float>& g,
                                        int64_t split) {
    std::vector<v1::PushRequest> messages(2);
    messages[0].set_push_id(push_id);
    messages[0].set_dtype(v1::DTYPE_INT8);
    v1::PartitionCount* count = messages[0].add_announced();
    count->set_partition_id(0);
    count->set_num_elements(n_);
    AddInt8Chunk(messages[0].mutable_chunks(), 0, 0, {g.begin(), g.begin() + split});
    AddInt8Chunk(messages[1].mutable_chunks(), 0, split, {g.begin() + split, g.end()});
    return messages;
  }
  // Gradient values of mixed sizes, so that blocks get different scales.
  std::vector<float> Int8Gradient() const {
    std::vector<float> g(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) g[i] = static_cast<float>((i * 37) % 101 - 50) / (1 + i / 256);
    return g;
  }

  // The first message of a whole push of partition 0: it announces all of
  // the partition and carries its first half.
  v1::PushRequest FirstHalf(const std::string& push_id) {
    v1::PushRequest p;
    p.set_push_id(push_id);
    p.set_dtype(v1::DTYPE_FP32);
    v1::PartitionCount* count = p.add_announced();
    count->set_partition_id(0);
    count->set_num_elements(n_);
    AddChunk(p.mutable_chunks(), 0, 0, n_ / 2, kGradient);
    return p;
  }
  v1::PushRequest SecondHalf() {
    v1::PushRequest p;
    AddChunk(p.mutable_chunks(), 0, n_ / 2, n_ - n_ / 2, kGradient);
    return p;
  }

  // The most messages a push of partition 0 may use: one per
  // kMinStreamMessageBytes of its payload, plus 2 (parameter_server.proto).
  int64_t MaxMessages() const { return 2 + n_ * 4 / kMinStreamMessageBytes; }

  // Runs a stream of `method` whose messages are raw bytes: the generated stub
  // cannot send bytes that do not parse.
  grpc::Status RawStream(const char* method, const std::vector<std::string>& messages) {
    std::shared_ptr<grpc::Channel> channel = NewChannel();
    grpc::ClientContext ctx;
    grpc::ByteBuffer reply;
    std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
        grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
            channel.get(),
            grpc::internal::RpcMethod(method, grpc::internal::RpcMethod::CLIENT_STREAMING), &ctx,
            &reply));
    for (const std::string& m : messages) {
      if (!writer->Write(Bytes(m))) break;
    }
    writer->WritesDone();
    return writer->Finish();
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

  struct Observed {
    v1::StatsResponse stats;
    std::vector<float> weights;  // By partition, in id order.
  };
  // The shard's state as a new client on a fresh connection sees it.
  Observed Observe() {
    auto stub = v1::ParameterServer::NewStub(NewChannel());
    Observed o;
    grpc::ClientContext stats_ctx;
    EXPECT_TRUE(stub->Stats(&stats_ctx, v1::StatsRequest(), &o.stats).ok());
    grpc::ClientContext pull_ctx;
    v1::PullRequest pull;
    pull.set_dtype(v1::DTYPE_FP32);
    auto reader = stub->Pull(&pull_ctx, pull);
    v1::PullResponse r;
    while (reader->Read(&r)) {
      const std::string& bytes = r.chunks(0).data();
      const size_t at = o.weights.size();
      o.weights.resize(at + bytes.size() / 4);
      EXPECT_TRUE(DecodeToFp32(v1::DTYPE_FP32, bytes, bytes.size() / 4, &o.weights[at]).ok());
    }
    EXPECT_TRUE(reader->Finish().ok());
    return o;
  }

  // Nothing changed since SetUp, and `push_id` (if any) is not remembered:
  // a whole push under it is then applied, once.
  void ExpectUntouched(const std::string& push_id = "") {
    LetTheShardSettle();
    const Observed o = Observe();
    EXPECT_EQ(o.stats.global_step(), 0u);
    EXPECT_EQ(o.stats.pushes_applied(), 0u);
    EXPECT_EQ(o.stats.pushes_duplicate(), 0u);
    EXPECT_EQ(o.stats.bytes_in(), 0u);
    for (const auto& p : o.stats.partitions()) EXPECT_EQ(p.version(), 0u) << p.partition_id();
    ASSERT_EQ(static_cast<int64_t>(o.weights.size()), layout_.total_elements());
    int64_t changed = 0;
    for (float w : o.weights) changed += w != kInitial ? 1 : 0;
    EXPECT_EQ(changed, 0) << "weights changed";
    if (push_id.empty()) return;

    grpc::ClientContext ctx;
    v1::PushResponse reply;
    auto writer = stub_->Push(&ctx, &reply);
    ASSERT_TRUE(writer->Write(FirstHalf(push_id)));
    ASSERT_TRUE(writer->Write(SecondHalf()));
    ASSERT_TRUE(writer->WritesDone());
    ASSERT_TRUE(writer->Finish().ok());
    EXPECT_FALSE(reply.duplicate()) << "the refused push's id was remembered";
    const Observed after = Observe();
    EXPECT_EQ(after.stats.pushes_applied(), 1u);
    EXPECT_EQ(after.stats.partitions(0).version(), 1u);
    const float updated = static_cast<float>(kInitial - kLr * kGradient);
    for (int64_t i = 0; i < layout_.total_elements(); ++i) {
      ASSERT_EQ(after.weights[i], i < n_ ? updated : kInitial) << "element " << i;
    }
  }

  TempDir dir_;
  std::unique_ptr<LocalShardCluster> shards_;
  const ModelLayout layout_ = *ModelLayout::Create({{"w", {64, 1024}}, {"b", {100}}});
  PartitionMap map_;
  int64_t n_ = 0;  // Elements of partition 0.
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

TEST_F(HostilePushTest, CancelledHalfPushChangesNothing) {
  grpc::ClientContext ctx;
  v1::PushResponse reply;
  auto writer = stub_->Push(&ctx, &reply);
  ASSERT_TRUE(writer->Write(FirstHalf("cancelled")));
  LetTheShardSettle();  // The shard has read the half.
  ctx.TryCancel();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ExpectUntouched("cancelled");
}

// The shard stages a stream's payload partition by partition as it arrives;
// whole partitions staged change nothing until the stream ends normally.
TEST_F(HostilePushTest, CancelledPushWithWholePartitionsStagedChangesNothing) {
  const int64_t m = map_.partitions()[1].num_elements;
  v1::PushRequest first = FirstHalf("cancelled-whole");
  v1::PartitionCount* count = first.add_announced();
  count->set_partition_id(1);
  count->set_num_elements(m);
  AddChunk(first.mutable_chunks(), 1, 0, m, kGradient);  // All of partition 1.
  grpc::ClientContext ctx;
  v1::PushResponse reply;
  auto writer = stub_->Push(&ctx, &reply);
  ASSERT_TRUE(writer->Write(first));
  LetTheShardSettle();  // The shard has staged partition 1 and half of 0.
  ctx.TryCancel();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ExpectUntouched("cancelled-whole");
}

TEST_F(HostilePushTest, PartitionsArrivingOutOfOrderAreAppliedWhole) {
  const int64_t m = map_.partitions()[1].num_elements;
  // Partition 1 before 0, and each partition's second half before its first.
  v1::PushRequest first;
  first.set_push_id("out-of-order");
  first.set_dtype(v1::DTYPE_FP32);
  for (const auto& [id, n] : {std::pair<uint32_t, int64_t>{1, m}, {0, n_}}) {
    v1::PartitionCount* count = first.add_announced();
    count->set_partition_id(id);
    count->set_num_elements(n);
  }
  AddChunk(first.mutable_chunks(), 1, m / 2, m - m / 2, kGradient);
  AddChunk(first.mutable_chunks(), 0, n_ / 2, n_ - n_ / 2, kGradient);
  v1::PushRequest second;
  AddChunk(second.mutable_chunks(), 0, 0, n_ / 2, kGradient);
  AddChunk(second.mutable_chunks(), 1, 0, m / 2, kGradient);
  ASSERT_TRUE(SendPush({first, second}).ok());
  const Observed o = Observe();
  EXPECT_EQ(o.stats.pushes_applied(), 1u);
  EXPECT_EQ(o.stats.partitions(0).version(), 1u);
  EXPECT_EQ(o.stats.partitions(1).version(), 1u);
  const float updated = static_cast<float>(kInitial - kLr * kGradient);
  ASSERT_EQ(static_cast<int64_t>(o.weights.size()), layout_.total_elements());
  for (int64_t i = 0; i < n_ + m; ++i) ASSERT_EQ(o.weights[i], updated) << "element " << i;
}

TEST_F(HostilePushTest, ChunksBeyondAPartitionsAnnouncementAreRefused) {
  // Within the stream's byte bound (partition 1's 10 announced elements are
  // missing), but partition 0 gets 10 elements more than announced.
  v1::PushRequest first = FirstHalf("overflow");
  v1::PartitionCount* count = first.add_announced();
  count->set_partition_id(1);
  count->set_num_elements(10);
  v1::PushRequest second = SecondHalf();
  AddChunk(second.mutable_chunks(), 0, 0, 10, kGradient);
  ExpectStatus(SendPush({first, second}), grpc::StatusCode::INVALID_ARGUMENT,
               "overlapping chunks for partition 0 at offset 0");
  ExpectUntouched("overflow");
}

TEST_F(HostilePushTest, HalfPushPastItsDeadlineChangesNothing) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(800));
  v1::PushResponse reply;
  auto writer = stub_->Push(&ctx, &reply);
  ASSERT_TRUE(writer->Write(FirstHalf("expired")));
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  ExpectUntouched("expired");
}

TEST_F(HostilePushTest, HalfPushOfAKilledClientChangesNothing) {
  const std::string first = absl::StrCat(dir_.path(), "/first.bin");
  ASSERT_TRUE(WriteFileAtomically(first, FirstHalf("killed").SerializeAsString()).ok());
  const std::string log = absl::StrCat(dir_.path(), "/pusher.log");
  auto pusher = ChildProcess::Start(
      {BinaryPath("spotps-test-stalled-push"), shards_->addresses(), first}, log);
  ASSERT_TRUE(pusher.ok()) << pusher.status();
  const absl::Status sent = (*pusher)->WaitForLog(log, "first message sent", absl::Seconds(30));
  ASSERT_TRUE(sent.ok()) << sent;
  LetTheShardSettle();  // The shard has read the half.
  (*pusher)->Signal(SIGKILL);
  ASSERT_TRUE((*pusher)->Wait(absl::Seconds(10)).ok());
  ExpectUntouched("killed");
}

TEST_F(HostilePushTest, HalfPushEndingInBytesThatDoNotParseIsRefused) {
  ExpectStatus(RawStream("/spotps.v1.ParameterServer/Push",
                         {FirstHalf("garbled").SerializeAsString(), kUnparseable}),
               grpc::StatusCode::INVALID_ARGUMENT,
               absl::StrCat("push announced ", n_, " elements of partition 0 but carried ", n_ / 2,
                            " (its stream ended early, or at a message that does not "
                            "parse)"));
  ExpectUntouched("garbled");
}

TEST_F(HostilePushTest, HalfPushEndingInAnOversizedMessageChangesNothing) {
  v1::PushRequest big = SecondHalf();
  big.mutable_chunks(0)->mutable_data()->append((kMaxMessageMb << 20) + 4, '\0');
  EXPECT_EQ(SendPush({FirstHalf("oversized"), big}).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  ExpectUntouched("oversized");
}

TEST_F(HostilePushTest, PushThatCarriesOtherThanItAnnouncedIsRefused) {
  ExpectStatus(
      SendPush({FirstHalf("short")}), grpc::StatusCode::INVALID_ARGUMENT,
      absl::StrCat("push announced ", n_, " elements of partition 0 but carried ", n_ / 2));

  v1::PushRequest silent = FirstHalf("silent");
  silent.clear_announced();
  ExpectStatus(SendPush({silent, SecondHalf()}), grpc::StatusCode::INVALID_ARGUMENT,
               "push announces no partitions");

  v1::PushRequest extra = FirstHalf("extra");
  AddChunk(extra.mutable_chunks(), 1, 0, 10, kGradient);
  ExpectStatus(SendPush({extra}), grpc::StatusCode::INVALID_ARGUMENT,
               "push carries partition 1, which its first message did not announce");

  v1::PushRequest twice = FirstHalf("twice");
  *twice.add_announced() = twice.announced(0);
  ExpectStatus(SendPush({twice, SecondHalf()}), grpc::StatusCode::INVALID_ARGUMENT,
               "push announces partition 0 twice");

  v1::PushRequest too_many = FirstHalf("too-many");
  too_many.mutable_announced(0)->set_num_elements(n_ + 1);
  ExpectStatus(SendPush({too_many, SecondHalf()}), grpc::StatusCode::INVALID_ARGUMENT,
               absl::StrCat("push announces ", n_ + 1, " elements of partition 0, which has ", n_));

  v1::PushRequest unknown = FirstHalf("unknown");
  unknown.mutable_announced(0)->set_partition_id(9999);
  ExpectStatus(SendPush({unknown, SecondHalf()}), grpc::StatusCode::NOT_FOUND,
               "partition 9999 does not exist");

  v1::PushRequest named = FirstHalf("long-name");
  named.set_worker_id(std::string(129, 'w'));
  ExpectStatus(SendPush({named, SecondHalf()}), grpc::StatusCode::INVALID_ARGUMENT,
               "push's worker_id has 129 bytes, more than 128");

  // More payload than announced is cut off at once.
  ExpectStatus(SendPush({FirstHalf("long"), SecondHalf(), SecondHalf()}),
               grpc::StatusCode::RESOURCE_EXHAUSTED,
               absl::StrCat("push stream carries more than the ", n_ * 4,
                            " payload bytes its first message announced"));
  ExpectUntouched("short");
}

TEST_F(HostilePushTest, Int8PushIsAppliedAsItsBlocksDecode) {
  const std::vector<float> g = Int8Gradient();
  const int64_t split = n_ / 2 + 100;
  ASSERT_TRUE(SendPush(Int8Push("int8", g, split)).ok());
  std::vector<float> decoded(g.size());
  RoundTripInt8Blocks(g.data(), 0, split, decoded.data());
  RoundTripInt8Blocks(g.data() + split, split, n_ - split, decoded.data() + split);
  const Observed o = Observe();
  EXPECT_EQ(o.stats.pushes_applied(), 1u);
  EXPECT_EQ(o.stats.partitions(0).version(), 1u);
  // Counted as the bytes that came: about a byte per element.
  EXPECT_EQ(o.stats.bytes_in(), Int8PayloadBytes(0, split) + Int8PayloadBytes(split, n_ - split));
  ASSERT_EQ(static_cast<int64_t>(o.weights.size()), layout_.total_elements());
  int64_t lossy = 0;
  for (int64_t i = 0; i < n_; ++i) {
    ASSERT_EQ(o.weights[i], static_cast<float>(kInitial - kLr * decoded[i])) << "element " << i;
    lossy += decoded[i] != g[i] ? 1 : 0;
  }
  EXPECT_GT(lossy, 0) << "the test's gradient should not survive int8 exactly";
}

TEST_F(HostilePushTest, Int8PushesWithBadBlocksChangeNothing) {
  const std::vector<float> g = Int8Gradient();
  // Scales that are not finite, negative, or beyond the gradient bound /
  // 127, in the second message's second block.
  for (float scale : {std::nanf(""), -0.5f, 1e17f}) {
    std::vector<v1::PushRequest> push = Int8Push("bad-scale", g, 256);
    std::memcpy(push[1].mutable_chunks(0)->mutable_data()->data() + 260, &scale, sizeof(scale));
    ExpectStatus(SendPush(push), grpc::StatusCode::INVALID_ARGUMENT,
                 "push chunk of partition 0: int8 block at element 512 has scale");
  }
  // A code of -128, which no encoder writes.
  std::vector<v1::PushRequest> low = Int8Push("low-code", g, 256);
  (*low[1].mutable_chunks(0)->mutable_data())[4 + 7] = static_cast<char>(-128);
  ExpectStatus(SendPush(low), grpc::StatusCode::INVALID_ARGUMENT,
               "int8 element 263 has code -128");
  // A chunk that ends inside a block's scale: the first one ends at a
  // block border, so 3 bytes more are the start of the next block's scale.
  std::vector<v1::PushRequest> short_block = Int8Push("short-block", g, 256);
  short_block[0].mutable_chunks(0)->mutable_data()->append("\x01\x02\x03", 3);
  ExpectStatus(SendPush(short_block), grpc::StatusCode::INVALID_ARGUMENT,
               "int8 payload ends 3 bytes into a block");
  // A dtype no shard knows.
  std::vector<v1::PushRequest> unknown = Int8Push("unknown-dtype", g, 256);
  unknown[0].set_dtype(static_cast<v1::DType>(4));
  ExpectStatus(SendPush(unknown), grpc::StatusCode::INVALID_ARGUMENT,
               "unsupported gradient dtype 4");
  // Pulls and inits stay FP32 or BF16.
  grpc::ClientContext ctx;
  v1::PullRequest pull;
  pull.set_dtype(v1::DTYPE_INT8);
  auto reader = stub_->Pull(&ctx, pull);
  v1::PullResponse r;
  while (reader->Read(&r)) {
  }
  ExpectStatus(reader->Finish(), grpc::StatusCode::INVALID_ARGUMENT, "unsupported pull dtype 3");
  ExpectUntouched("bad-scale");
}

TEST_F(HostilePushTest, FloodsOfEmptyChunksAndMessagesAreCutOffQuickly) {
  const int64_t peak_before = PeakRssKib(shards_->shard(0).pid());
  ASSERT_GT(peak_before, 0);
  // Writes `first`, then `filler` up to `times` times (until the shard ends
  // the call), and returns the call's status and how long it took.
  auto flood = [&](const v1::PushRequest& first, const v1::PushRequest& filler, int times) {
    const absl::Time start = absl::Now();
    grpc::ClientContext ctx;
    v1::PushResponse reply;
    auto writer = stub_->Push(&ctx, &reply);
    if (writer->Write(first)) {
      for (int i = 0; i < times && writer->Write(filler); ++i) {
      }
      writer->WritesDone();
    }
    const grpc::Status status = writer->Finish();
    EXPECT_LT(absl::Now() - start, absl::Seconds(10));
    return status;
  };
  // 20 MiB of empty chunks: 10 million of them, in 1,000 messages. The
  // limit is a chunk per message, per tensor (2) and per partition (1).
  v1::PushRequest empty_chunks;
  for (int i = 0; i < 10'000; ++i) empty_chunks.add_chunks();
  ExpectStatus(flood(FirstHalf("empty-chunks"), empty_chunks, 1'000),
               grpc::StatusCode::RESOURCE_EXHAUSTED,
               absl::StrCat("push stream sent more than ", MaxMessages() + 3, " chunks"));
  // 200,000 empty messages.
  ExpectStatus(flood(FirstHalf("empty-messages"), v1::PushRequest(), 200'000),
               grpc::StatusCode::RESOURCE_EXHAUSTED,
               absl::StrCat("push stream sent more than ", MaxMessages(), " messages"));

  // A first message that is itself a flood: cut off before its
  // announcement is even read.
  v1::PushRequest flooded_first = FirstHalf("flooded-first");
  for (int i = 0; i < 100'000; ++i) flooded_first.add_chunks();
  ExpectStatus(SendPush({flooded_first}), grpc::StatusCode::RESOURCE_EXHAUSTED,
               "push stream's first message carries more than");

  const int64_t peak_after = PeakRssKib(shards_->shard(0).pid());
  EXPECT_LT(peak_after - peak_before, 100 << 10)
      << "peak RSS grew from " << peak_before << " KiB to " << peak_after << " KiB";
  ExpectUntouched("empty-chunks");
}

TEST_F(HostilePushTest, InitOfAnotherModelIsRefusedOnItsFirstMessage) {
  // 4 GiB of FP32 values the client never sends: the refusal must not wait
  // for them.
  const ModelLayout huge = *ModelLayout::Create({{"huge", {int64_t{1} << 30}}});
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::InitResponse reply;
  auto writer = stub_->Init(&ctx, &reply);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(writer->Write(InitHeader(huge)));
  // No WritesDone: the stream stays open, as if the values were coming.
  ExpectStatus(writer->Finish(), grpc::StatusCode::FAILED_PRECONDITION,
               "shard already holds a different model");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ExpectUntouched();
}

TEST_F(HostilePushTest, StreamsWithoutAFirstMessageSaySo) {
  const std::string why =
      "stream ended before its first message (it sent none, or one that "
      "does not parse as a spotps.v1.";
  // Empty streams.
  ExpectStatus(SendPush({}), grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("push ", why));
  ExpectStatus(RawStream("/spotps.v1.ParameterServer/Init", {}), grpc::StatusCode::INVALID_ARGUMENT,
               absl::StrCat("init ", why));
  // A first message that does not parse.
  ExpectStatus(RawStream("/spotps.v1.ParameterServer/Push", {kUnparseable}),
               grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("push ", why, "PushRequest)"));
  ExpectStatus(RawStream("/spotps.v1.ParameterServer/Init", {kUnparseable}),
               grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("init ", why, "InitRequest)"));
  ExpectUntouched();
}

}  // namespace
}  // namespace spotps
