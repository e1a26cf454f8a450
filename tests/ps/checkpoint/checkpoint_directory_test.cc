#include "ps/checkpoint/checkpoint_directory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/crc32c.h"
#include "common/little_endian.h"
#include "ps/store/shard_store.h"
#include "tests/support/child_process.h"

namespace spotps {
namespace {

using ::spotps::testing::TempDir;

// 8 partitions of about 42.5 K elements: 4 on each of 2 shards.
ModelLayout TestLayout() {
  return *ModelLayout::Create({{"w", {300'000}}, {"b", {77}}, {"e", {40'000}}});
}

// AdamW with weight decay and a warmup + cosine schedule, so that the
// optimizer state, each partition's version (bias correction) and the global
// step (learning rate) all shape the next update.
ShardOptions AdamWOptions(uint32_t shard_index, uint32_t num_shards = 2) {
  ShardOptions o;
  o.shard_index = shard_index;
  o.num_shards = num_shards;
  o.optimizer.kind = OptimizerKind::kAdamW;
  o.optimizer.weight_decay = 0.01f;
  o.schedule.base_lr = 1e-2;
  o.schedule.decay = DecayKind::kCosine;
  o.schedule.warmup_steps = 4;
  o.schedule.total_steps = 100;
  return o;
}

// FP32 payloads that own their bytes, so the PayloadRange views stay valid.
struct Payload {
  std::vector<std::string> bytes;
  std::vector<PayloadRange> ranges;
};

// One range per partition of `store`'s shard, element after element taken
// from `next_value`, each based on the partition's current version (0 before
// Init).
Payload MakePayload(const ShardStore& store, const PartitionMap& map,
                    const std::function<float()>& next_value) {
  Payload p;
  const std::vector<uint32_t>& ids = map.PartitionsOfShard(store.options().shard_index);
  p.bytes.reserve(ids.size());
  for (uint32_t id : ids) {
    std::string& bytes =
        p.bytes.emplace_back(map.partitions()[id].num_elements * sizeof(float), '\0');
    for (size_t i = 0; i < bytes.size(); i += sizeof(float)) {
      const float v = next_value();
      std::memcpy(&bytes[i], &v, sizeof(v));
    }
    const uint64_t version = store.initialized() ? *store.Version(id) : 0;
    p.ranges.push_back(PayloadRange{id, 0, bytes, version});
  }
  return p;
}

Payload RandomPayload(const ShardStore& store, const PartitionMap& map, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  return MakePayload(store, map, [&] { return normal(rng); });
}

std::unique_ptr<ShardStore> NewStore(const ShardOptions& options) {
  return *ShardStore::Create(options);
}

absl::StatusOr<PushOutcome> PushRandom(ShardStore& store, uint32_t seed) {
  const Payload g = RandomPayload(store, store.partition_map(), seed);
  return store.Push(absl::StrCat("push-", seed), v1::DTYPE_FP32, g.ranges);
}

// A store initialised with random weights that has taken `pushes` AdamW steps.
std::unique_ptr<ShardStore> TrainedStore(const ShardOptions& options, int pushes) {
  std::unique_ptr<ShardStore> store = NewStore(options);
  const ModelLayout layout = TestLayout();
  const PartitionMap map = *PartitionMap::Create(layout, options.num_shards);
  const Payload init = RandomPayload(*store, map, 1000 + options.shard_index);
  EXPECT_TRUE(*store->Init(layout, init.ranges));
  for (int k = 0; k < pushes; ++k) EXPECT_TRUE(PushRandom(*store, k).ok());
  return store;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void ExpectBitIdentical(const ShardState& a, const ShardState& b) {
  EXPECT_EQ(a.layout.fingerprint(), b.layout.fingerprint());
  EXPECT_EQ(a.shard_index, b.shard_index);
  EXPECT_EQ(a.num_shards, b.num_shards);
  EXPECT_EQ(a.global_step, b.global_step);
  EXPECT_EQ(a.optimizer_state_slots, b.optimizer_state_slots);
  EXPECT_EQ(a.recent_push_ids, b.recent_push_ids);
  ASSERT_EQ(a.partitions.size(), b.partitions.size());
  for (size_t i = 0; i < a.partitions.size(); ++i) {
    const PartitionSnapshot& pa = a.partitions[i];
    const PartitionSnapshot& pb = b.partitions[i];
    EXPECT_EQ(pa.id, pb.id);
    EXPECT_EQ(pa.version, pb.version) << "partition " << pa.id;
    EXPECT_TRUE(SameBits(pa.weights, pb.weights)) << "partition " << pa.id;
    ASSERT_EQ(pa.optimizer_state.size(), pb.optimizer_state.size());
    for (size_t s = 0; s < pa.optimizer_state.size(); ++s) {
      EXPECT_TRUE(SameBits(pa.optimizer_state[s], pb.optimizer_state[s]))
          << "partition " << pa.id << " slot " << s;
    }
  }
}

// ------------------------------------------------------- export / import

TEST(ShardStateTest, ExportImportRoundTripIsBitIdenticalAndTheNextPushAgrees) {
  const ShardOptions options = AdamWOptions(1);
  std::unique_ptr<ShardStore> original = TrainedStore(options, 5);
  const ShardState exported = *original->ExportState();
  EXPECT_EQ(exported.global_step, 5u);
  EXPECT_EQ(exported.optimizer_state_slots, 2);
  EXPECT_EQ(exported.partitions.size(), original->owned_partitions().size());
  for (const PartitionSnapshot& p : exported.partitions) EXPECT_EQ(p.version, 5u);

  std::unique_ptr<ShardStore> restored = NewStore(options);
  ASSERT_TRUE(restored->ImportState(exported).ok());
  ASSERT_TRUE(restored->initialized());
  ExpectBitIdentical(exported, *restored->ExportState());
  EXPECT_EQ(restored->LearningRateNow(), original->LearningRateNow());

  const absl::StatusOr<PushOutcome> a = PushRandom(*original, 77);
  const absl::StatusOr<PushOutcome> b = PushRandom(*restored, 77);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  EXPECT_EQ(a->global_step, b->global_step);
  EXPECT_EQ(a->new_versions, b->new_versions);
  const ShardState after = *original->ExportState();
  ExpectBitIdentical(after, *restored->ExportState());
  EXPECT_FALSE(SameBits(after.partitions[0].weights, exported.partitions[0].weights));

  // The comparison is sensitive: without the AdamW moments the same push
  // lands somewhere else.
  ShardState amnesiac = exported;
  for (PartitionSnapshot& p : amnesiac.partitions) {
    for (std::vector<float>& slot : p.optimizer_state) std::fill(slot.begin(), slot.end(), 0.0f);
  }
  std::unique_ptr<ShardStore> forgetful = NewStore(options);
  ASSERT_TRUE(forgetful->ImportState(std::move(amnesiac)).ok());
  ASSERT_TRUE(PushRandom(*forgetful, 77).ok());
  EXPECT_FALSE(
      SameBits(forgetful->ExportState()->partitions[0].weights, after.partitions[0].weights));
}

TEST(ShardStateTest, ExportNeedsAnInitialisedStore) {
  EXPECT_EQ(NewStore(AdamWOptions(0))->ExportState().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ShardStateTest, ImportRefusesAnInitialisedStoreAndChangesNothing) {
  const ShardState incoming = *TrainedStore(AdamWOptions(0), 3)->ExportState();
  std::unique_ptr<ShardStore> busy = TrainedStore(AdamWOptions(0), 1);
  const ShardState before = *busy->ExportState();
  const absl::Status s = busy->ImportState(incoming);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("already holds a model"), absl::string_view::npos) << s;
  ExpectBitIdentical(before, *busy->ExportState());
}

struct Mismatch {
  std::string name;
  std::function<void(ShardState*)> mutate;
  absl::StatusCode code;
  std::string message_part;
};

TEST(ShardStateTest, ImportRefusesMismatchesWithPreciseCodesAndChangesNothing) {
  const ShardOptions options = AdamWOptions(1);
  const ShardState good = *TrainedStore(options, 2)->ExportState();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<Mismatch> mismatches = {
      {"other shard index", [](ShardState* s) { s->shard_index = 0; },
       absl::StatusCode::kInvalidArgument, "state is of shard 0 of 2, this is shard 1 of 2"},
      {"other shard count", [](ShardState* s) { s->num_shards = 3; },
       absl::StatusCode::kInvalidArgument, "state is of shard 1 of 3"},
      {"other layout",
       [](ShardState* s) {
         s->layout = *ModelLayout::Create({{"w", {300'000}}, {"b", {78}}});
       },
       absl::StatusCode::kInvalidArgument, "elements"},
      {"empty layout", [](ShardState* s) { s->layout = ModelLayout(); },
       absl::StatusCode::kInvalidArgument, "layout is unusable"},
      {"fewer slots than the optimizer",
       [](ShardState* s) {
         s->optimizer_state_slots = 1;
         for (PartitionSnapshot& p : s->partitions) p.optimizer_state.pop_back();
       },
       absl::StatusCode::kInvalidArgument,
       "1 optimizer state slots, this shard's optimizer uses 2"},
      {"slot arrays disagree with the slot count",
       [](ShardState* s) { s->partitions[1].optimizer_state.pop_back(); },
       absl::StatusCode::kInvalidArgument, "1 optimizer state arrays, the state declares 2"},
      {"short slot array", [](ShardState* s) { s->partitions[0].optimizer_state[1].pop_back(); },
       absl::StatusCode::kInvalidArgument, "optimizer state array 1"},
      {"missing partition", [](ShardState* s) { s->partitions.pop_back(); },
       absl::StatusCode::kInvalidArgument, "is missing"},
      {"duplicate partition", [](ShardState* s) { s->partitions.back() = s->partitions.front(); },
       absl::StatusCode::kInvalidArgument, "appears twice"},
      {"foreign partition", [](ShardState* s) { s->partitions[0].id = 9999; },
       absl::StatusCode::kInvalidArgument, "not owned by shard 1"},
      {"short weights", [](ShardState* s) { s->partitions[2].weights.pop_back(); },
       absl::StatusCode::kInvalidArgument, "weights, the layout gives it"},
      {"NaN weight", [nan](ShardState* s) { s->partitions[3].weights[17] = nan; },
       absl::StatusCode::kInvalidArgument, "NaN or Inf"},
      {"Inf moment", [inf](ShardState* s) { s->partitions[0].optimizer_state[1][5] = inf; },
       absl::StatusCode::kInvalidArgument, "NaN or Inf"},
  };
  std::unique_ptr<ShardStore> store = NewStore(options);
  for (const Mismatch& m : mismatches) {
    ShardState bad = good;
    m.mutate(&bad);
    const absl::Status s = store->ImportState(bad);
    EXPECT_EQ(s.code(), m.code) << m.name << ": " << s;
    EXPECT_NE(s.message().find(m.message_part), absl::string_view::npos) << m.name << ": " << s;
    EXPECT_FALSE(store->initialized()) << m.name;
  }
  ASSERT_TRUE(store->ImportState(good).ok());
  ExpectBitIdentical(good, *store->ExportState());
}

// Writers push gradients of 2 with SGD at lr 0.5, so every partition at
// version k holds exactly w0 - k. An export that tore a partition, or paired
// weights with another version, would break that.
TEST(ShardStateTest, ExportDuringPushesIsConsistentPerPartition) {
  ShardOptions options;
  options.optimizer.kind = OptimizerKind::kSgd;
  options.schedule.base_lr = 0.5;
  std::unique_ptr<ShardStore> store = NewStore(options);
  const ModelLayout layout = TestLayout();
  const PartitionMap map = *PartitionMap::Create(layout, 1);
  const Payload init = MakePayload(*store, map, [i = 0]() mutable { return float(i++ % 11); });
  ASSERT_TRUE(*store->Init(layout, init.ranges));
  const ShardState w0 = *store->ExportState();

  constexpr int kWriters = 3, kPushesEach = 20;
  std::atomic<int> finished{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int k = 0; k < kPushesEach; ++k) {
        const Payload g = MakePayload(*store, map, [] { return 2.0f; });
        EXPECT_TRUE(store->Push(absl::StrCat("w", w, "-", k), v1::DTYPE_FP32, g.ranges).ok());
      }
      finished++;
    });
  }
  int exports = 0, inconsistent = 0;
  for (bool last = false; !last; ++exports) {
    last = finished.load() == kWriters;  // Then this export sees every push.
    const ShardState s = *store->ExportState();
    for (size_t i = 0; i < s.partitions.size(); ++i) {
      const PartitionSnapshot& p = s.partitions[i];
      for (size_t e = 0; e < p.weights.size(); ++e) {
        if (p.weights[e] != w0.partitions[i].weights[e] - static_cast<float>(p.version)) {
          ++inconsistent;
          break;
        }
      }
      if (last) {
        EXPECT_EQ(p.version, uint64_t{kWriters * kPushesEach});
      }
    }
    if (last) {
      EXPECT_EQ(s.global_step, uint64_t{kWriters * kPushesEach});
    }
  }
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(inconsistent, 0);
  EXPECT_GT(exports, 1);
}

// ------------------------------------------------------------ checkpoints

class ShardCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    trained_ = TrainedStore(AdamWOptions(1), 3);
    state_ = *trained_->ExportState();
  }
  CheckpointDirectory OpenStore(int keep_last = 3) {
    return *CheckpointDirectory::Open(Dir(), 1, keep_last);
  }
  std::string Dir() const { return absl::StrCat(dir_.path(), "/ckpt"); }
  // Writes checkpoints 1..n, checkpoint k holding state_ with global_step k.
  void WriteSeries(CheckpointDirectory& store, int n) {
    for (int k = 1; k <= n; ++k) {
      ShardState s = state_;
      s.global_step = k;
      ASSERT_TRUE(store.Write(k, s, absl::StrCat("blob-", k)).ok());
    }
  }

  TempDir dir_;
  std::unique_ptr<ShardStore> trained_;
  ShardState state_;
};

TEST_F(ShardCheckpointTest, WriteThenReadNewestRestoresTheStore) {
  CheckpointDirectory store = OpenStore();
  ASSERT_TRUE(store.Write(7, state_, "progress").ok());
  EXPECT_EQ(store.PathOf(7), Dir() + "/shard-1-00000000000000000007.ckpt");
  EXPECT_TRUE(std::filesystem::exists(store.PathOf(7)));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(Dir()),
                          std::filesystem::directory_iterator()),
            1)
      << "no temporary file is left behind";

  absl::StatusOr<ShardCheckpoint> read = store.ReadNewest();
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->id, 7u);
  EXPECT_EQ(read->extra_blob, "progress");
  EXPECT_TRUE(read->skipped.empty());
  ExpectBitIdentical(state_, read->state);

  std::unique_ptr<ShardStore> restored = NewStore(AdamWOptions(1));
  ASSERT_TRUE(restored->ImportState(std::move(read->state)).ok());
  ASSERT_TRUE(PushRandom(*trained_, 9).ok());
  ASSERT_TRUE(PushRandom(*restored, 9).ok());
  ExpectBitIdentical(*trained_->ExportState(), *restored->ExportState());
}

// A push applied before a checkpoint whose reply was lost is retried after
// the shard restarted from that checkpoint: it must be a duplicate.
TEST_F(ShardCheckpointTest, PushIdsSurviveACheckpointSoARetryIsNotAppliedTwice) {
  EXPECT_EQ(state_.recent_push_ids, (std::vector<std::string>{"push-0", "push-1", "push-2"}));
  CheckpointDirectory store = OpenStore();
  ASSERT_TRUE(store.Write(1, state_, "").ok());
  absl::StatusOr<ShardCheckpoint> read = store.ReadNewest();
  ASSERT_TRUE(read.ok()) << read.status();
  std::unique_ptr<ShardStore> restored = NewStore(AdamWOptions(1));
  ASSERT_TRUE(restored->ImportState(std::move(read->state)).ok());
  absl::StatusOr<PushOutcome> retry = PushRandom(*restored, 2);  // Same id as the last one.
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->duplicate);
  ExpectBitIdentical(state_, *restored->ExportState());
  // A state that claims malformed ids is refused.
  ShardState bad = state_;
  bad.recent_push_ids.push_back(std::string(200, 'x'));
  EXPECT_EQ(store.Write(2, bad, "").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewStore(AdamWOptions(1))->ImportState(bad).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ShardCheckpointTest, ExtraBlobRoundTripsAsOpaqueBytes) {
  CheckpointDirectory store = OpenStore(10);
  std::string binary("\0\xff\x01 SPOTCKPT \0", 14);
  std::string large(100'000, '\0');
  std::mt19937 rng(3);
  for (char& c : large) c = static_cast<char>(rng());
  const std::vector<std::string> blobs = {"", binary, large};
  for (size_t i = 0; i < blobs.size(); ++i) ASSERT_TRUE(store.Write(i + 1, state_, blobs[i]).ok());
  for (size_t i = 0; i < blobs.size(); ++i) {
    absl::StatusOr<ShardCheckpoint> read = store.Read(i + 1);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->extra_blob, blobs[i]) << i;
    absl::StatusOr<std::string> blob = store.ReadExtraBlob(i + 1);  // Header only.
    ASSERT_TRUE(blob.ok()) << blob.status();
    EXPECT_EQ(*blob, blobs[i]) << i;
  }
  EXPECT_EQ(store.ReadExtraBlob(9).status().code(), absl::StatusCode::kNotFound);
  // The header's checksum still guards the blob; a truncated file is refused.
  const std::string path = store.PathOf(2);
  std::string damaged = *ReadFile(path);
  damaged[40] ^= 0x01;
  ASSERT_TRUE(WriteFileAtomically(path, damaged).ok());
  EXPECT_EQ(store.ReadExtraBlob(2).status().code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE(WriteFileAtomically(path, damaged.substr(0, damaged.size() / 2)).ok());
  EXPECT_EQ(store.ReadExtraBlob(2).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(ShardCheckpointTest, KeepLastDeletesOlderCheckpointsOfThisShardOnly) {
  CheckpointDirectory store = OpenStore(2);
  const std::string other_shard = Dir() + "/shard-0-00000000000000000001.ckpt";
  const std::string other_tmp = Dir() + "/shard-0-00000000000000000002.ckpt.tmp.1";
  const std::string stale_tmp = Dir() + "/shard-1-00000000000000000003.ckpt.tmp.99999";
  const std::string unrelated = Dir() + "/notes.txt";
  for (const std::string& path : {other_shard, other_tmp, stale_tmp, unrelated}) {
    ASSERT_TRUE(WriteFileAtomically(path, "x").ok());
  }
  WriteSeries(store, 5);
  EXPECT_EQ(*store.ListIds(), (std::vector<uint64_t>{4, 5}));
  EXPECT_EQ(store.ReadNewest()->state.global_step, 5u);
  EXPECT_FALSE(std::filesystem::exists(stale_tmp)) << "left by a crashed writer of this shard";
  for (const std::string& path : {other_shard, other_tmp, unrelated}) {
    EXPECT_TRUE(std::filesystem::exists(path)) << path;
  }
  // An id below the newest prunes only below itself: the caller owns the ids.
  ASSERT_TRUE(store.Write(3, state_, "").ok());
  EXPECT_EQ(*store.ListIds(), (std::vector<uint64_t>{3, 4, 5}));
}

TEST_F(ShardCheckpointTest, TruncatedNewestIsSkippedForThePreviousOne) {
  CheckpointDirectory store = OpenStore();
  WriteSeries(store, 2);
  const std::string newest = store.PathOf(2);
  const uint64_t size = std::filesystem::file_size(newest);
  const std::string intact = *ReadFile(newest);
  for (uint64_t cut : {uint64_t{0}, uint64_t{10}, size / 2, size - 1}) {
    ASSERT_TRUE(WriteFileAtomically(newest, intact.substr(0, cut)).ok());
    EXPECT_EQ(store.Read(2).status().code(), absl::StatusCode::kDataLoss) << cut;
    absl::StatusOr<ShardCheckpoint> read = store.ReadNewest();
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->id, 1u);
    EXPECT_EQ(read->extra_blob, "blob-1");
    ASSERT_EQ(read->skipped.size(), 1u);
    EXPECT_NE(read->skipped[0].find(newest), std::string::npos) << read->skipped[0];
    EXPECT_NE(read->skipped[0].find("truncated"), std::string::npos) << read->skipped[0];
  }
}

TEST_F(ShardCheckpointTest, BitFlippedNewestIsSkippedForThePreviousOne) {
  CheckpointDirectory store = OpenStore();
  WriteSeries(store, 2);
  const std::string newest = store.PathOf(2);
  const std::string intact = *ReadFile(newest);
  const size_t n = intact.size();
  // Magic, format version, header length, global_step, the layout, record
  // payloads, a record checksum, the trailer's length and checksum.
  for (size_t at : {size_t{0}, size_t{8}, size_t{12}, size_t{32}, size_t{60}, n / 3, n / 2, n - 20,
                    n - 14, n - 9, n - 1}) {
    std::string flipped = intact;
    flipped[at] ^= 0x10;
    ASSERT_TRUE(WriteFileAtomically(newest, flipped).ok());
    const absl::Status direct = store.Read(2).status();
    EXPECT_EQ(direct.code(), absl::StatusCode::kDataLoss) << "byte " << at << ": " << direct;
    absl::StatusOr<ShardCheckpoint> read = store.ReadNewest();
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->id, 1u) << "byte " << at;
    ASSERT_EQ(read->skipped.size(), 1u);
    EXPECT_NE(read->skipped[0].find(newest), std::string::npos) << read->skipped[0];
  }
}

TEST_F(ShardCheckpointTest, NoIntactCheckpointIsNotFound) {
  CheckpointDirectory store = OpenStore();
  EXPECT_EQ(store.ReadNewest().status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.Read(1).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(WriteFileAtomically(store.PathOf(4), "not a checkpoint").ok());
  const absl::Status s = store.ReadNewest().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find(store.PathOf(4)), absl::string_view::npos) << s;
}

TEST_F(ShardCheckpointTest, FileMustHoldTheCheckpointItsNameSays) {
  CheckpointDirectory store = OpenStore();
  ASSERT_TRUE(store.Write(2, state_, "").ok());
  std::filesystem::rename(store.PathOf(2), store.PathOf(3));
  const absl::Status s = store.Read(3).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("its name says checkpoint 3 of shard 1"), absl::string_view::npos)
      << s;
}

// A file whose header is intact (checksum and all) and describes a model of
// 2^30 parameters, but which holds no data: the reader must refuse the
// first record from its length alone instead of allocating gigabytes.
TEST_F(ShardCheckpointTest, HostileLengthsAreRefusedBeforeAllocating) {
  CheckpointDirectory store = OpenStore();
  const ModelLayout huge = *ModelLayout::Create({{"w", {int64_t{1} << 30}}});
  const std::string layout = huge.ToProto().SerializeAsString();
  const PartitionMap map = *PartitionMap::Create(huge, 2);
  std::string header;
  PutU64(&header, 1);  // checkpoint id
  PutU32(&header, 1);  // shard index
  PutU32(&header, 2);  // num_shards
  PutU64(&header, 0);  // global_step
  PutU32(&header, 2);  // slots
  PutU32(&header, static_cast<uint32_t>(map.PartitionsOfShard(1).size()));
  PutU32(&header, static_cast<uint32_t>(layout.size()));
  header += layout;
  PutU64(&header, 0);  // no extra blob
  std::string file("SPOTCKPT", 8);
  PutU32(&file, 1);  // Version 1 (no push ids) is still read.
  PutU32(&file, static_cast<uint32_t>(header.size()));
  file += header;
  PutU32(&file, Crc32cExtend(0, file.data(), file.size()));
  PutU32(&file, map.PartitionsOfShard(1)[0]);
  PutU64(&file, 0);
  PutU64(&file, map.partitions()[map.PartitionsOfShard(1)[0]].num_elements);
  PutU64(&file, file.size() + 12);
  PutU32(&file, Crc32cExtend(0, file.data(), file.size()));
  ASSERT_TRUE(WriteFileAtomically(store.PathOf(1), file).ok());
  absl::Status s = store.Read(1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("the file has room for 0"), absl::string_view::npos) << s;

  // A header length far beyond the file.
  std::string overlong = file;
  const uint32_t absurd = 0xfffffff0u;
  std::memcpy(&overlong[12], &absurd, sizeof(absurd));
  ASSERT_TRUE(WriteFileAtomically(store.PathOf(1), overlong).ok());
  s = store.Read(1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("header length 4294967280 overruns"), absl::string_view::npos) << s;
}

TEST_F(ShardCheckpointTest, WriteRefusesStatesItCannotStore) {
  CheckpointDirectory shard0 = *CheckpointDirectory::Open(Dir(), 0, 1);
  absl::Status s = shard0.Write(1, state_, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  ShardState broken = state_;
  broken.partitions[0].weights[0] = std::numeric_limits<float>::quiet_NaN();
  s = OpenStore().Write(1, broken, "");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(std::filesystem::is_empty(Dir()));
}

TEST(CheckpointDirectoryTest, OpenValidatesAndCreatesTheDirectory) {
  TempDir dir;
  EXPECT_EQ(CheckpointDirectory::Open(dir.path() + "/a", 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckpointDirectory::Open("", 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(CheckpointDirectory::Open(dir.path() + "/a/b", 0, 1).ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() + "/a/b"));
}

// ------------------------------------------------------------ throughput

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Not run by default (it moves about a gigabyte through the disk): run with
// --gtest_also_run_disabled_tests to print the figures.
TEST(ShardCheckpointThroughput, DISABLED_SixteenMillionParameterAdamWShard) {
  constexpr int64_t kParams = int64_t{16} << 20;
  ShardOptions options = AdamWOptions(0, 1);
  std::unique_ptr<ShardStore> store = NewStore(options);
  const ModelLayout layout = *ModelLayout::Create({{"w", {kParams}}});
  const PartitionMap map = *PartitionMap::Create(layout, 1);
  {
    const Payload init = RandomPayload(*store, map, 1);
    ASSERT_TRUE(*store->Init(layout, init.ranges));
  }
  ASSERT_TRUE(PushRandom(*store, 2).ok());

  auto start = std::chrono::steady_clock::now();
  ShardState state = *store->ExportState();
  const double export_s = SecondsSince(start);
  TempDir dir;
  CheckpointDirectory checkpoints = *CheckpointDirectory::Open(dir.path(), 0, 2);
  start = std::chrono::steady_clock::now();
  ASSERT_TRUE(checkpoints.Write(1, state, "progress").ok());
  const double write_s = SecondsSince(start);
  const double mb = std::filesystem::file_size(checkpoints.PathOf(1)) / 1e6;

  double warm_read_s;
  {
    start = std::chrono::steady_clock::now();
    const absl::StatusOr<ShardCheckpoint> warm = checkpoints.ReadNewest();
    warm_read_s = SecondsSince(start);
    ASSERT_TRUE(warm.ok()) << warm.status();
  }
  // Drop the file from the page cache (it is synced, so its pages are clean).
  const int fd = ::open(checkpoints.PathOf(1).c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  start = std::chrono::steady_clock::now();
  absl::StatusOr<ShardCheckpoint> cold = checkpoints.ReadNewest();
  const double cold_read_s = SecondsSince(start);
  ASSERT_TRUE(cold.ok()) << cold.status();

  std::unique_ptr<ShardStore> restored = NewStore(options);
  start = std::chrono::steady_clock::now();
  ASSERT_TRUE(restored->ImportState(std::move(cold->state)).ok());
  const double import_s = SecondsSince(start);
  std::printf(
      "checkpoint of %lld AdamW parameters: %.1f MB; export %.3f s, write+fsync %.3f s "
      "(%.0f MB/s), read page-cached %.3f s (%.0f MB/s), read after fadvise(DONTNEED) %.3f s "
      "(%.0f MB/s), import (move) %.3f s\n",
      static_cast<long long>(kParams), mb, export_s, write_s, mb / write_s, warm_read_s,
      mb / warm_read_s, cold_read_s, mb / cold_read_s, import_s);
}

}  // namespace
}  // namespace spotps
