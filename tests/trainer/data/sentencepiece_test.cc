// SentencePiece through its plug-in: models trained on generated text
// round-trip any UTF-8, are saved beside the data file, named in its
// header with their hash, and reopened from it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "trainer/data/fnv1a.h"
#include "trainer/data/token_dataset.h"
#include "trainer/data/tokenizer_factory.h"

namespace spotps {
namespace {

// Sentences of made-up words, a few thousand lines.
std::string TrainingText() {
  const char* syllables[] = {"ka", "to", "ri", "men", "sul", "ba", "ne", "qu", "ix", "lo"};
  std::string text;
  uint32_t state = 7;
  for (int line = 0; line < 3000; ++line) {
    for (int word = 0; word < 8; ++word) {
      for (int s = 0; s < 3; ++s) {
        state = state * 1664525u + 1013904223u;
        text += syllables[(state >> 24) % 10];
      }
      text += word < 7 ? " " : ".\n";
    }
  }
  return text;
}

std::unique_ptr<Tokenizer> TrainOrDie(absl::string_view spec, SentencePieceModelType type) {
  static const std::string* const text = new std::string(TrainingText());
  const std::vector<absl::string_view> texts = {*text};
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      MakeTokenizer(*ParseTokenizerSpec(spec), texts, type);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

std::string RoundTrip(Tokenizer& tokenizer, absl::string_view text) {
  std::vector<uint32_t> ids;
  const absl::Status status = tokenizer.Encode(text, ids);
  EXPECT_TRUE(status.ok()) << status;
  return tokenizer.Decode(std::vector<int64_t>(ids.begin(), ids.end()));
}

// Text the model never saw: other scripts, emoji, control characters and
// whitespace runs come back byte for byte (byte fallback, no normalization).
const char kUnseenText[] =
    "katori  mensul\tba\n\n  leading and trailing  \r\n"
    "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 e\xcc\x81 \x01\x7f \xef\xbc\xa1 \xef\xac\x81";

TEST(SentencePieceTest, BpeAndUnigramRoundTripAnyText) {
  for (SentencePieceModelType type : {SentencePieceModelType::kBpe,
                                      SentencePieceModelType::kUnigram}) {
    std::unique_ptr<Tokenizer> tokenizer = TrainOrDie("sp:400", type);
    ASSERT_NE(tokenizer, nullptr);
    EXPECT_EQ(tokenizer->kind(), TokenizerKind::kSentencePiece);
    EXPECT_EQ(tokenizer->vocab_size(), 400);
    EXPECT_EQ(RoundTrip(*tokenizer, kUnseenText), kUnseenText);
    EXPECT_EQ(RoundTrip(*tokenizer, TrainingText().substr(0, 5000)), TrainingText().substr(0, 5000));
    std::vector<uint32_t> ids;
    EXPECT_EQ(tokenizer->Encode("bad \xff", ids).code(), absl::StatusCode::kInvalidArgument);
    const std::vector<int64_t> out_of_range = {-1, 400};
    EXPECT_EQ(tokenizer->Decode(out_of_range), "??");
  }
  EXPECT_EQ(ParseSentencePieceModelType("unigram").value(), SentencePieceModelType::kUnigram);
  EXPECT_FALSE(ParseSentencePieceModelType("word").ok());
}

TEST(SentencePieceTest, TooLargeAVocabularyIsInvalidArgument) {
  const std::vector<absl::string_view> texts = {"a tiny text\n"};
  const absl::Status status =
      MakeTokenizer(*ParseTokenizerSpec("sp:5000"), texts, SentencePieceModelType::kBpe).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "training a SentencePiece bpe model")) << status;
}

class SentencePieceFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = absl::StrCat(::testing::TempDir(), "/sentencepiece_test_", getpid(), ".tokens");
  }
  void TearDown() override {
    std::remove(path_.c_str());
    std::remove((path_ + ".spm").c_str());
  }
  std::string path_;
};

TEST_F(SentencePieceFileTest, HeaderNamesTheModelAndItsHash) {
  std::unique_ptr<Tokenizer> tokenizer = TrainOrDie("sp:300", SentencePieceModelType::kBpe);
  ASSERT_NE(tokenizer, nullptr);
  std::vector<uint32_t> ids;
  ASSERT_TRUE(tokenizer->Encode(TrainingText(), ids).ok());
  absl::StatusOr<std::string> model_file = SaveModelBeside(*tokenizer, path_);
  ASSERT_TRUE(model_file.ok()) << model_file.status();
  EXPECT_EQ(*model_file, path_.substr(path_.rfind('/') + 1) + ".spm");
  ASSERT_TRUE(WriteTokenFile(path_, ids, IdentityOf(*tokenizer, *model_file), 0.1).ok());

  absl::StatusOr<TokenDataset> dataset = TokenDataset::Open(path_);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const TokenizerIdentity& identity = dataset->header().tokenizer;
  EXPECT_EQ(identity.kind, TokenizerKind::kSentencePiece);
  EXPECT_EQ(identity.model_file, *model_file);
  EXPECT_EQ(identity.vocab_size, 300u);
  std::ifstream model(path_ + ".spm", std::ios::binary);
  const std::string model_bytes(std::istreambuf_iterator<char>(model), {});
  EXPECT_EQ(identity.vocabulary_hash, Fnv1a64(model_bytes));

  absl::StatusOr<std::unique_ptr<Tokenizer>> reopened = OpenTokenizerOf(identity, path_);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(RoundTrip(**reopened, kUnseenText), kUnseenText);

  // sp_model:PATH encodes with the saved model, to the same ids.
  absl::StatusOr<std::unique_ptr<Tokenizer>> loaded =
      MakeTokenizer(*ParseTokenizerSpec(absl::StrCat("sp_model:", path_, ".spm")), {},
                    SentencePieceModelType::kBpe);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<uint32_t> again;
  ASSERT_TRUE((*loaded)->Encode(TrainingText(), again).ok());
  EXPECT_EQ(again, ids);

  // A model file replaced by another is refused by hash.
  std::unique_ptr<Tokenizer> other = TrainOrDie("sp:301", SentencePieceModelType::kBpe);
  ASSERT_TRUE(SaveModelBeside(*other, path_).ok());
  const absl::Status refused = OpenTokenizerOf(identity, path_).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.message(), "sentencepiece vocabulary of 300 tokens"))
      << refused;
}

}  // namespace
}  // namespace spotps
