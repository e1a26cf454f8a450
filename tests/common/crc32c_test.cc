#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace spotps {
namespace {

TEST(Crc32cTest, MatchesPublishedCheckValuesAndExtends) {
  EXPECT_EQ(Crc32cExtend(0, "123456789", 9), 0xE3069283u);
  const std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(Crc32cExtend(0, zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
  EXPECT_EQ(Crc32cExtend(0, ones.data(), ones.size()), 0x62A8AB43u);
  std::string text(1000, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 7 + 3);
  const uint32_t whole = Crc32cExtend(0, text.data(), text.size());
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{500}, size_t{999}}) {
    EXPECT_EQ(
        Crc32cExtend(Crc32cExtend(0, text.data(), split), text.data() + split, text.size() - split),
        whole)
        << split;
  }
}

TEST(Crc32cTest, TwoLanesEqualTwoSeparateCrcs) {
  std::string text(777, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 13 + 1);
  uint32_t section = 0, file = Crc32cExtend(0, "prefix", 6);
  const uint32_t want_file = Crc32cExtend(file, text.data(), text.size());
  Crc32cExtendTwo(&section, &file, text.data(), text.size());
  EXPECT_EQ(section, Crc32cExtend(0, text.data(), text.size()));
  EXPECT_EQ(file, want_file);
}

}  // namespace
}  // namespace spotps
