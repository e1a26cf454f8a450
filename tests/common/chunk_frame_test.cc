#include "common/chunk_frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/tensor_codec.h"
#include "google/protobuf/stubs/logging.h"

namespace spotps {
namespace {

// `bytes` as a message cut into slices at the given sizes (the rest in one).
grpc::ByteBuffer Sliced(const std::string& bytes, const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  for (size_t n : cuts) {
    n = std::min(n, bytes.size() - at);
    slices.emplace_back(bytes.data() + at, n);
    at += n;
  }
  slices.emplace_back(bytes.data() + at, bytes.size() - at);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

std::string Payload(const ChunkView& c) {
  std::string out(c.payload_bytes, '\0');
  c.CopyPayload(out.data());
  return out;
}

TEST(ChunkFrameTest, WrittenMessagesAreTheProtobufMessage) {
  v1::PushRequest header;
  header.set_push_id("p-1");
  header.set_dtype(v1::DTYPE_BF16);
  v1::PartitionCount* count = header.add_announced();
  count->set_partition_id(7);
  count->set_num_elements(3);
  ChunkFrameWriter frame(header.SerializeAsString(), kPushChunksField,
                         {{7, 1, 42, 4}, {300, 1ull << 40, 0, 0}, {9, 0, ~0ull, 2}});
  std::memcpy(frame.payload(0), "abcd", 4);
  std::memcpy(frame.payload(2), "xy", 2);

  v1::PushRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(frame.Take())));
  EXPECT_EQ(parsed.push_id(), "p-1");
  EXPECT_EQ(parsed.dtype(), v1::DTYPE_BF16);
  ASSERT_EQ(parsed.announced_size(), 1);
  ASSERT_EQ(parsed.chunks_size(), 3);
  EXPECT_EQ(parsed.chunks(0).partition_id(), 7u);
  EXPECT_EQ(parsed.chunks(0).offset(), 1u);
  EXPECT_EQ(parsed.chunks(0).version(), 42u);
  EXPECT_EQ(parsed.chunks(0).data(), "abcd");
  EXPECT_EQ(parsed.chunks(1).partition_id(), 300u);
  EXPECT_EQ(parsed.chunks(1).offset(), 1ull << 40);
  EXPECT_EQ(parsed.chunks(1).data(), "");
  EXPECT_EQ(parsed.chunks(2).version(), ~0ull);
  EXPECT_EQ(parsed.chunks(2).data(), "xy");
}

TEST(ChunkFrameTest, ReadsProtobufMessagesCutIntoSlicesAnywhere) {
  v1::PullResponse message;
  message.set_dtype(v1::DTYPE_FP32);
  for (uint32_t id : {3u, 1u}) {
    v1::PartitionChunk* c = message.add_chunks();
    c->set_partition_id(id);
    c->set_offset(id * 1000);
    c->set_version(id + 5);  // Protobuf writes it after the data.
    c->set_data(std::string(100 + id, static_cast<char>('a' + id)));
  }
  const std::string bytes = message.SerializeAsString();
  for (const std::vector<size_t>& cuts : std::vector<std::vector<size_t>>{
           {}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {7, 50, 3, 61}, {110}}) {
    grpc::ByteBuffer buffer = Sliced(bytes, cuts);
    ChunkFrameReader frame;
    ASSERT_TRUE(frame.Parse(&buffer, kPullChunksField));
    v1::PullResponse fields;
    ASSERT_TRUE(fields.ParseFromString(frame.fields()));
    EXPECT_EQ(fields.dtype(), v1::DTYPE_FP32);
    EXPECT_EQ(fields.chunks_size(), 0);
    ASSERT_EQ(frame.chunks().size(), 2u);
    for (int i = 0; i < 2; ++i) {
      const ChunkView& c = frame.chunks()[i];
      EXPECT_EQ(c.partition_id, message.chunks(i).partition_id());
      EXPECT_EQ(c.offset, message.chunks(i).offset());
      EXPECT_EQ(c.version, message.chunks(i).version());
      EXPECT_EQ(Payload(c), message.chunks(i).data());
    }
    EXPECT_EQ(frame.payload_bytes(), 103u + 101u);
  }
}

TEST(ChunkFrameTest, DecodesElementsSplitBetweenSlices) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> values(1001);
  for (float& v : values) v = dist(rng);
  for (v1::DType dtype : {v1::DTYPE_BF16, v1::DTYPE_FP32}) {
    const size_t width = WireBytesPerElement(dtype);
    ChunkFrameWriter frame("", kPullChunksField, {{0, 0, 1, values.size() * width}});
    EncodeFp32(values.data(), values.size(), dtype, frame.payload(0));
    // Odd cuts put elements across slice borders, one byte in a slice too.
    grpc::ByteBuffer buffer = Sliced(Flatten(frame.Take()), {5, 1, 1, 333, 2, 777, 3});
    ChunkFrameReader reader;
    ASSERT_TRUE(reader.Parse(&buffer, kPullChunksField));
    ASSERT_EQ(reader.chunks().size(), 1u);
    const ChunkView& chunk = reader.chunks()[0];
    EXPECT_GT(chunk.pieces.size(), 3u);
    std::string expected(values.size() * width, '\0');
    EncodeFp32(values.data(), values.size(), dtype, expected.data());
    std::vector<float> want(values.size());
    ASSERT_TRUE(DecodeToFp32(dtype, expected, values.size(), want.data()).ok());
    std::vector<float> got(values.size(), -1.0f);
    chunk.DecodePayload(dtype, 0, values.size(), got.data());
    EXPECT_EQ(got, want);
    // A window that starts and ends inside pieces.
    std::vector<float> part(500, -1.0f);
    chunk.DecodePayload(dtype, 101, 500, part.data());
    EXPECT_EQ(part, std::vector<float>(want.begin() + 101, want.begin() + 601));
  }
}

TEST(ChunkFrameTest, StopsPastMaxChunks) {
  v1::PushRequest flood;
  for (int i = 0; i < 5; ++i) flood.add_chunks()->set_partition_id(i);
  flood.set_push_id("after the chunks");  // Field 1, but written last here.
  const std::string bytes = flood.SerializeAsString() + std::string("\x0a\x01z", 3);
  ChunkFrameReader frame;
  grpc::ByteBuffer buffer = Sliced(bytes, {});
  ASSERT_TRUE(frame.Parse(&buffer, kPushChunksField, 2));
  EXPECT_TRUE(frame.truncated());
  EXPECT_EQ(frame.chunks().size(), 3u);
  buffer = Sliced(bytes, {});
  ASSERT_TRUE(frame.Parse(&buffer, kPushChunksField, 5));
  EXPECT_FALSE(frame.truncated());
  EXPECT_EQ(frame.chunks().size(), 5u);
  v1::PushRequest fields;
  ASSERT_TRUE(fields.ParseFromString(frame.fields()));
  EXPECT_EQ(fields.push_id(), "z");  // The last one wins, as in protobuf.
}

TEST(ChunkFrameTest, RefusesWhatIsNotAWellFormedMessage) {
  v1::PushRequest good;
  good.set_push_id("x");
  v1::PartitionChunk* c = good.add_chunks();
  c->set_partition_id(1);
  c->set_data("12345678");
  const std::string bytes = good.SerializeAsString();
  auto parses = [](const std::string& b) {
    grpc::ByteBuffer buffer = Sliced(b, {2, 3});
    ChunkFrameReader frame;
    return frame.Parse(&buffer, kPushChunksField);
  };
  EXPECT_TRUE(parses(bytes));
  EXPECT_TRUE(parses(""));                                   // The empty message.
  EXPECT_FALSE(parses(bytes.substr(0, bytes.size() - 1)));   // Cut short in the payload.
  EXPECT_FALSE(parses(std::string("\x0f\x0f\x0f\x0f", 4)));  // Wire type 7.
  EXPECT_FALSE(parses(std::string("\x08\xff", 2)));          // A varint cut short.
  EXPECT_FALSE(parses(std::string(11, '\xff')));             // A varint of 11 bytes.
  EXPECT_FALSE(parses(std::string("\x00\x01", 2)));          // Field number 0.
  EXPECT_TRUE(parses(std::string("\x0b\x10\x01\x0c", 4)));   // A group, skipped.
  EXPECT_FALSE(parses(std::string("\x0b\x14", 2)));          // A group ended as another.
  EXPECT_FALSE(parses(std::string("\x0b\x10\x01", 3)));      // A group never ended.
  // A chunk whose data runs past the chunk's own length.
  EXPECT_FALSE(
      parses(std::string("\x22\x03\x1a\x05"
                         "abcde",
                         9)));
  // Unknown fields, inside and outside chunks, are passed over.
  EXPECT_TRUE(parses(bytes + std::string("\xf8\x01\x05\x22\x02\x78\x01", 7)));
}

// Random push messages, then bytes changed, inserted or cut: wherever
// protobuf parses the bytes, the frame reader must see the same message, and
// wherever protobuf refuses them, so must the reader (with the other fields
// parsed by protobuf, as the shard does).
TEST(ChunkFrameTest, AgreesWithProtobufOnMutatedMessages) {
  google::protobuf::LogSilencer quiet;  // Mutated strings are not UTF-8: protobuf says so.
  std::mt19937 rng(12);
  auto below = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  int parsed = 0, refused = 0;
  for (int round = 0; round < 20'000; ++round) {
    v1::PushRequest m;
    m.set_push_id(std::string(below(6), static_cast<char>('a' + below(26))));
    m.set_dtype(static_cast<v1::DType>(below(3)));
    for (uint32_t i = below(3); i > 0; --i) {
      v1::PartitionCount* a = m.add_announced();
      a->set_partition_id(below(300));
      a->set_num_elements(below(2) ? below(100) : (uint64_t{1} << 40) + below(100));
    }
    for (uint32_t i = below(4); i > 0; --i) {
      v1::PartitionChunk* c = m.add_chunks();
      c->set_partition_id(below(300));
      c->set_offset(below(2) ? below(1000) : ~uint64_t{0} - below(3));
      c->set_version(below(50));
      std::string data(below(40), '\0');
      for (char& x : data) x = static_cast<char>(rng());
      c->set_data(data);
    }
    std::string bytes = m.SerializeAsString();
    for (uint32_t k = below(4); k > 0 && !bytes.empty(); --k) {
      const size_t at = below(static_cast<uint32_t>(bytes.size()));
      switch (below(4)) {
        case 0:
          bytes[at] = static_cast<char>(rng());
          break;
        case 1:
          bytes[at] = static_cast<char>(bytes[at] ^ (1 << below(8)));
          break;
        case 2:
          bytes.insert(bytes.begin() + at, static_cast<char>(rng()));
          break;
        default:
          bytes.resize(at);
      }
    }
    v1::PushRequest reference;
    const bool protobuf_ok = reference.ParseFromString(bytes);
    std::vector<size_t> cuts;
    for (uint32_t k = below(5); k > 0; --k) cuts.push_back(below(20));
    grpc::ByteBuffer buffer = Sliced(bytes, cuts);
    ChunkFrameReader frame;
    v1::PushRequest fields;
    const bool ours_ok =
        frame.Parse(&buffer, kPushChunksField) && fields.ParseFromString(frame.fields());
    ASSERT_EQ(ours_ok, protobuf_ok) << "round " << round;
    if (!ours_ok) {
      ++refused;
      continue;
    }
    ++parsed;
    ASSERT_EQ(frame.chunks().size(), static_cast<size_t>(reference.chunks_size()));
    for (int i = 0; i < reference.chunks_size(); ++i) {
      const ChunkView& c = frame.chunks()[i];
      EXPECT_EQ(c.partition_id, reference.chunks(i).partition_id());
      EXPECT_EQ(c.offset, reference.chunks(i).offset());
      EXPECT_EQ(c.version, reference.chunks(i).version());
      EXPECT_EQ(Payload(c), reference.chunks(i).data());
    }
    reference.clear_chunks();
    EXPECT_EQ(fields.SerializeAsString(), reference.SerializeAsString()) << "round " << round;
  }
  // Both outcomes were exercised.
  EXPECT_GT(parsed, 5'000);
  EXPECT_GT(refused, 1'000);
}

}  // namespace
}  // namespace spotps
