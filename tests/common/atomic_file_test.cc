#include "common/atomic_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/posix_file.h"

namespace spotps {
namespace {

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/atomic_file_test.", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(AtomicFileTest, ReplacesContentsAndLeavesNoTemporary) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  ASSERT_TRUE(WriteFileAtomically(path, std::string(3 << 20, 'x')).ok());
  EXPECT_EQ(ReadFile(path)->size(), size_t{3} << 20);
  EXPECT_EQ(*ListFileNames(dir_), std::vector<std::string>{"f"});
}

TEST_F(AtomicFileTest, FailedWriterLeavesTheOldFileAndNoTemporary) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  absl::Status s = WriteFileAtomicallyWith(path, [&](int fd, const std::string& tmp) {
    EXPECT_EQ(tmp, TemporaryPathFor(path));
    EXPECT_TRUE(WriteAll(fd, "partial", 7, tmp).ok());
    return absl::DataLossError("writer gave up");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(*ReadFile(path), "old");
  EXPECT_EQ(*ListFileNames(dir_), std::vector<std::string>{"f"});
}

TEST_F(AtomicFileTest, MissingDirectoryIsAnErrorNotACrash) {
  absl::Status s = WriteFileAtomically(dir_ + "/no/such/f", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("cannot create"), absl::string_view::npos) << s;
  EXPECT_EQ(ReadFile(dir_ + "/none").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ListFileNames(dir_ + "/none").status().code(), absl::StatusCode::kNotFound);
}

TEST(PosixFileTest, DirectoryOf) {
  EXPECT_EQ(DirectoryOf("name"), ".");
  EXPECT_EQ(DirectoryOf("/name"), "/");
  EXPECT_EQ(DirectoryOf("a/b/c"), "a/b");
}

}  // namespace
}  // namespace spotps
