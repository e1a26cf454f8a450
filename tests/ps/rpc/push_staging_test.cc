// PushStaging keeps exactly what a push stream carried, in arrival order,
// and its pool hands the same memory to the next push.
#include "ps/rpc/push_staging.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/int8_blocks.h"

namespace spotps {
namespace {

struct Sent {
  uint32_t partition_id;
  uint64_t offset;
  std::string bytes;
};

// The chunks of one message, as a shard receives them.
ChunkFrameReader Receive(const std::vector<Sent>& sent) {
  std::vector<ChunkHeader> headers;
  for (const Sent& s : sent) headers.push_back({s.partition_id, s.offset, 9, s.bytes.size()});
  ChunkFrameWriter writer("", kPushChunksField, headers);
  for (size_t i = 0; i < sent.size(); ++i) {
    std::memcpy(writer.payload(i), sent[i].bytes.data(), sent[i].bytes.size());
  }
  grpc::ByteBuffer buffer = writer.Take();
  ChunkFrameReader frame;
  EXPECT_TRUE(frame.Parse(&buffer, kPushChunksField));
  return frame;
}

TEST(PushStagingTest, KeepsEveryChunkInArrivalOrderWhateverItsPartitionAndOffset) {
  StagingPool pool;
  const AnnouncedElements announced = {{0, 4}, {1, 2}};
  const std::vector<Sent> sent = {
      {1, 1, "b1"},   {0, 2, "a2a3"}, {1, 0, "b0"},
      {0, 0, "a0a1"}, {0, 9, "xx"},  // More of partition 0 than announced: kept apart.
      {5, 0, "zz"},                  // A partition not announced: kept apart.
  };
  PushStaging staging(&pool, announced, v1::DTYPE_BF16);
  // Across two messages, as a stream delivers them.
  ChunkFrameReader first = Receive({sent.begin(), sent.begin() + 3});
  for (const ChunkView& c : first.chunks()) {
    ASSERT_TRUE(staging.Add(c).ok());
  }
  ChunkFrameReader second = Receive({sent.begin() + 3, sent.end()});
  for (const ChunkView& c : second.chunks()) {
    ASSERT_TRUE(staging.Add(c).ok());
  }
  first = ChunkFrameReader();  // The messages' buffers are gone; the staged bytes stay.
  second = ChunkFrameReader();

  const std::vector<PayloadRange>& ranges = staging.ranges();
  ASSERT_EQ(ranges.size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(ranges[i].partition_id, sent[i].partition_id) << i;
    EXPECT_EQ(ranges[i].offset, sent[i].offset) << i;
    EXPECT_EQ(ranges[i].version, 9u) << i;
    EXPECT_EQ(std::string(ranges[i].bytes), sent[i].bytes) << i;
    // As BF16, "xx" and "zz" are about 1e34 and 1e36: beyond the gradient
    // bound, so the store checks (and refuses) them itself.
    EXPECT_EQ(ranges[i].within_gradient_bound, i < 4) << i;
  }
  // A partition's chunks share its block, back to back.
  EXPECT_EQ(ranges[3].bytes.data(), ranges[1].bytes.data() + 4);
  EXPECT_EQ(ranges[2].bytes.data(), ranges[0].bytes.data() + 2);
}

TEST(PushStagingTest, ChecksTheGradientBoundAcrossCopyWindowsAndSlices) {
  StagingPool pool;
  const int64_t n = 100'000;  // 200 KB of BF16: several copy windows.
  for (int64_t bad : {int64_t{-1}, int64_t{0}, int64_t{32'768}, n - 1}) {
    std::string payload;
    for (int64_t i = 0; i < n; ++i) payload += i == bad ? std::string("\xc0\x7f", 2) : "\x80\x3f";
    ChunkFrameWriter writer("", kPushChunksField, {{0, 0, 1, payload.size()}});
    std::memcpy(writer.payload(0), payload.data(), payload.size());
    // Cut into slices at odd places, so elements straddle them.
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(writer.Take().Dump(&slices).ok());
    const std::string flat(reinterpret_cast<const char*>(slices[0].begin()), slices[0].size());
    std::vector<grpc::Slice> cut = {grpc::Slice(flat.data(), 70'001),
                                    grpc::Slice(flat.data() + 70'001, 3),
                                    grpc::Slice(flat.data() + 70'004, flat.size() - 70'004)};
    grpc::ByteBuffer buffer(cut.data(), cut.size());
    ChunkFrameReader frame;
    ASSERT_TRUE(frame.Parse(&buffer, kPushChunksField));
    PushStaging staging(&pool, {{0, static_cast<uint64_t>(n)}}, v1::DTYPE_BF16);
    ASSERT_TRUE(staging.Add(frame.chunks()[0]).ok());
    EXPECT_EQ(std::string(staging.ranges()[0].bytes), payload) << "NaN at " << bad;
    EXPECT_EQ(staging.ranges()[0].within_gradient_bound, bad < 0) << "NaN at " << bad;
  }
}

// An int8 chunk is staged as the FP32 values its blocks decode to, whether
// its payload arrives in one slice or cut inside a scale and a block.
TEST(PushStagingTest, DecodesInt8ChunksInOneSliceOrSeveral) {
  const int64_t n = 1000;  // Blocks of 256, the last one short.
  const uint64_t offset = 512;
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>((i * 37) % 101 - 50) / 7.0f;
  std::string payload(Int8PayloadBytes(offset, n), '\0');
  EncodeInt8Blocks(values.data(), offset, n, payload.data());
  std::vector<float> expected(n);
  RoundTripInt8Blocks(values.data(), offset, n, expected.data());
  for (size_t cut_at : {size_t{0}, size_t{2}, size_t{300}}) {  // 0: one slice.
    ChunkFrameWriter writer("", kPushChunksField, {{0, offset, 1, payload.size()}});
    std::memcpy(writer.payload(0), payload.data(), payload.size());
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(writer.Take().Dump(&slices).ok());
    const std::string flat(reinterpret_cast<const char*>(slices[0].begin()), slices[0].size());
    const size_t split = cut_at == 0 ? flat.size() : flat.size() - payload.size() + cut_at;
    std::vector<grpc::Slice> cut = {grpc::Slice(flat.data(), split)};
    if (split < flat.size()) cut.emplace_back(flat.data() + split, flat.size() - split);
    grpc::ByteBuffer buffer(cut.data(), cut.size());
    ChunkFrameReader frame;
    ASSERT_TRUE(frame.Parse(&buffer, kPushChunksField));
    ASSERT_EQ(frame.chunks()[0].pieces.size(), cut_at == 0 ? 1u : 2u);
    StagingPool pool;
    PushStaging staging(&pool, {{0, static_cast<uint64_t>(n)}}, v1::DTYPE_INT8);
    ASSERT_TRUE(staging.Add(frame.chunks()[0]).ok()) << "cut at " << cut_at;
    ASSERT_EQ(staging.ranges()[0].bytes.size(), n * sizeof(float));
    std::vector<float> staged(n);
    std::memcpy(staged.data(), staging.ranges()[0].bytes.data(), n * sizeof(float));
    EXPECT_EQ(staged, expected) << "cut at " << cut_at;
  }
}

TEST(PushStagingTest, ThePoolGivesTheSameMemoryToTheNextPush) {
  StagingPool pool(size_t{6} << 20);
  const AnnouncedElements announced = {{0, 1'000'000}};
  const char* staged_at = nullptr;
  for (int push = 0; push < 3; ++push) {
    PushStaging staging(&pool, announced, v1::DTYPE_BF16);
    ChunkFrameReader frame = Receive({{0, 0, std::string(2'000'000, 'g')}});
    ASSERT_TRUE(staging.Add(frame.chunks()[0]).ok());
    if (push == 0) staged_at = staging.ranges()[0].bytes.data();
    EXPECT_EQ(staging.ranges()[0].bytes.data(), staged_at) << "push " << push;
  }
  EXPECT_EQ(pool.idle_bytes(), size_t{2} << 20);
  // Past max_idle_bytes, blocks are freed instead of kept.
  StagingPool::Block a = pool.Take(size_t{4} << 20), b = pool.Take(size_t{4} << 20);
  EXPECT_GE(a.capacity, size_t{4} << 20);
  pool.Give(std::move(a));
  pool.Give(std::move(b));
  EXPECT_EQ(pool.idle_bytes(), (size_t{2} << 20) + (size_t{4} << 20));
}

}  // namespace
}  // namespace spotps
