#include "common/little_endian.h"

#include <gtest/gtest.h>

#include <string>

namespace spotps {
namespace {

TEST(LittleEndianTest, LeastSignificantByteFirst) {
  std::string out;
  PutU32(&out, 0x04030201u);
  PutU64(&out, 0x0c0b0a0908070605ull);
  EXPECT_EQ(out, std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", 12));
  EXPECT_EQ(DecodeU32(out.data()), 0x04030201u);
  EXPECT_EQ(DecodeU64(out.data() + 4), 0x0c0b0a0908070605ull);
}

TEST(LittleEndianTest, RoundTripsExtremes) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{0x80}, ~uint64_t{0}, uint64_t{1} << 63}) {
    char buf[8];
    EncodeU64(buf, v);
    EXPECT_EQ(DecodeU64(buf), v);
    EncodeU32(buf, static_cast<uint32_t>(v));
    EXPECT_EQ(DecodeU32(buf), static_cast<uint32_t>(v));
  }
}

TEST(FieldCursorTest, TakesFieldsInOrderAndRefusesToOverrun) {
  std::string bytes;
  PutU32(&bytes, 7);
  PutU64(&bytes, 9);
  bytes += "abc";
  FieldCursor cursor(bytes);
  uint32_t a = 0;
  uint64_t b = 0;
  absl::string_view tail;
  ASSERT_TRUE(cursor.U32(&a));
  ASSERT_TRUE(cursor.U64(&b));
  EXPECT_FALSE(cursor.Bytes(4, &tail));  // Only 3 left: nothing is taken.
  ASSERT_TRUE(cursor.Bytes(3, &tail));
  EXPECT_EQ(a, 7u);
  EXPECT_EQ(b, 9u);
  EXPECT_EQ(tail, "abc");
  EXPECT_TRUE(cursor.empty());
  EXPECT_FALSE(cursor.U32(&a));
}

}  // namespace
}  // namespace spotps
