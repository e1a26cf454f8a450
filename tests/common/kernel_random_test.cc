#include "common/kernel_random.h"

#include <gtest/gtest.h>

#include <set>

namespace spotps {
namespace {

TEST(KernelRandomTest, DrawsDoNotRepeat) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 10000; ++i) seen.insert(KernelRandomU64());
  EXPECT_EQ(seen.size(), 10000u);
}

TEST(KernelRandomTest, BytesCoverEveryValue) {
  const std::string bytes = KernelRandomBytes(1 << 16);
  ASSERT_EQ(bytes.size(), size_t{1} << 16);
  std::set<unsigned char> values(bytes.begin(), bytes.end());
  EXPECT_EQ(values.size(), 256u);  // Missing one has odds of about 1e-109.
}

}  // namespace
}  // namespace spotps
