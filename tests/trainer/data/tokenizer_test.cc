// The pieces of the tokenizers that need no installed vocabulary: UTF-8,
// the JavaScript character classes, GPT-2's pre-tokenizer and BPE on small
// hand-made vocabularies, and the --tokenizer specs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "trainer/data/gpt2_bpe.h"
#include "trainer/data/gpt2_pretokenizer.h"
#include "trainer/data/tokenizer_factory.h"
#include "trainer/data/unicode_classes.h"
#include "trainer/data/utf8.h"

namespace spotps {
namespace {

TEST(Utf8Test, FindsTheFirstInvalidByte) {
  EXPECT_EQ(FindInvalidUtf8("plain ascii, long enough for the 8-byte path"), 44u);
  EXPECT_EQ(FindInvalidUtf8("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80"), 14u);
  EXPECT_EQ(FindInvalidUtf8("ab\x80"), 2u);                   // A lone continuation byte.
  EXPECT_EQ(FindInvalidUtf8("ab\xc0\xaf"), 2u);               // Overlong '/'.
  EXPECT_EQ(FindInvalidUtf8("ab\xe0\x80\xaf"), 2u);           // Overlong, 3 bytes.
  EXPECT_EQ(FindInvalidUtf8("ab\xed\xa0\x80"), 2u);           // A surrogate, U+D800.
  EXPECT_EQ(FindInvalidUtf8("ab\xf4\x90\x80\x80"), 2u);       // Past U+10FFFF.
  EXPECT_EQ(FindInvalidUtf8("ab\xe2\x82"), 2u);               // Cut short.
  EXPECT_EQ(FindInvalidUtf8("12345678\xff"), 8u);             // After an ASCII word.
  EXPECT_EQ(FindInvalidUtf8(std::string("a\0b", 3)), 3u);     // NUL is valid.
  const absl::Status status = CheckUtf8("one\ntwo \xc3\x28", "f.txt");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "f.txt: invalid UTF-8 at byte 8 (line 2): c3 28");
}

TEST(Utf8Test, DecodesEachLength) {
  int length = 0;
  EXPECT_EQ(DecodeValidUtf8("A", &length), U'A');
  EXPECT_EQ(length, 1);
  EXPECT_EQ(DecodeValidUtf8("\xc3\xa9", &length), U'\u00e9');
  EXPECT_EQ(length, 2);
  EXPECT_EQ(DecodeValidUtf8("\xe4\xb8\xad", &length), U'\u4e2d');
  EXPECT_EQ(length, 3);
  EXPECT_EQ(DecodeValidUtf8("\xf0\x9f\x98\x80", &length), U'\U0001f600');
  EXPECT_EQ(length, 4);
}

// JavaScript's classes, not Python's or POSIX's: U+0085 and U+200B are not
// \s there, U+FEFF is; combining marks are neither letters nor numbers.
TEST(UnicodeClassesTest, FollowsJavaScript) {
  using C = CodePointClass;
  EXPECT_EQ(ClassOfCodePoint(U'a'), C::kLetter);
  EXPECT_EQ(ClassOfCodePoint(U'7'), C::kNumber);
  EXPECT_EQ(ClassOfCodePoint(U' '), C::kWhitespace);
  EXPECT_EQ(ClassOfCodePoint(U'\v'), C::kWhitespace);
  EXPECT_EQ(ClassOfCodePoint(U'_'), C::kOther);
  EXPECT_EQ(ClassOfCodePoint(0x00a0), C::kWhitespace);
  EXPECT_EQ(ClassOfCodePoint(0xfeff), C::kWhitespace);
  EXPECT_EQ(ClassOfCodePoint(0x3000), C::kWhitespace);
  EXPECT_EQ(ClassOfCodePoint(0x0085), C::kOther);
  EXPECT_EQ(ClassOfCodePoint(0x200b), C::kOther);
  EXPECT_EQ(ClassOfCodePoint(0x180e), C::kOther);
  EXPECT_EQ(ClassOfCodePoint(0x0301), C::kOther);  // Combining acute accent.
  EXPECT_EQ(ClassOfCodePoint(0x00aa), C::kLetter);
  EXPECT_EQ(ClassOfCodePoint(0x4e2d), C::kLetter);
  EXPECT_EQ(ClassOfCodePoint(0x0663), C::kNumber);  // Arabic-Indic three.
  EXPECT_EQ(ClassOfCodePoint(0x216b), C::kNumber);  // Roman numeral twelve.
  EXPECT_EQ(ClassOfCodePoint(0x00b2), C::kNumber);  // Superscript two.
  EXPECT_EQ(ClassOfCodePoint(0x1d518), C::kLetter);  // Mathematical fraktur U.
  EXPECT_EQ(ClassOfCodePoint(0x1f600), C::kOther);
  EXPECT_EQ(ClassOfCodePoint(0xd800), C::kOther);
  EXPECT_EQ(ClassOfCodePoint(0x110000), C::kOther);
  EXPECT_FALSE(std::string(CodePointClassesUnicodeVersion()).empty());
}

std::vector<std::string> Pieces(absl::string_view text) {
  std::vector<std::string> pieces;
  Gpt2Pretokenizer pretokenizer(text);
  absl::string_view piece;
  while (pretokenizer.Next(&piece)) pieces.emplace_back(piece);
  return pieces;
}

using Split = std::vector<std::string>;

// Expected splits are String.matchAll's under node with GPT-2's pattern.
TEST(Gpt2PretokenizerTest, SplitsAsJavaScriptDoes) {
  EXPECT_EQ(Pieces("Hello world"), (Split{"Hello", " world"}));
  EXPECT_EQ(Pieces("don't"), (Split{"don", "'t"}));
  EXPECT_EQ(Pieces("I'M"), (Split{"I", "'", "M"}));
  EXPECT_EQ(Pieces("''s"), (Split{"''", "s"}));
  EXPECT_EQ(Pieces("we're 'll'd"), (Split{"we", "'re", " '", "ll", "'d"}));
  EXPECT_EQ(Pieces("a  b"), (Split{"a", " ", " b"}));
  EXPECT_EQ(Pieces("x\n\ny"), (Split{"x", "\n", "\n", "y"}));
  EXPECT_EQ(Pieces("end  "), (Split{"end", "  "}));
  EXPECT_EQ(Pieces(" 123abc"), (Split{" 123", "abc"}));
  EXPECT_EQ(Pieces("\t\tx"), (Split{"\t", "\t", "x"}));
  EXPECT_EQ(Pieces(" !!"), (Split{" !!"}));
  EXPECT_EQ(Pieces("na\xc3\xafve caf\xc3\xa9"), (Split{"na\xc3\xafve", " caf\xc3\xa9"}));
  EXPECT_EQ(Pieces("e\xcc\x81"), (Split{"e", "\xcc\x81"}));
  EXPECT_EQ(Pieces("\xc2\xa0x"), (Split{"\xc2\xa0", "x"}));
  EXPECT_EQ(Pieces("a\xe2\x80\x8b" "b"), (Split{"a", "\xe2\x80\x8b", "b"}));
  EXPECT_EQ(Pieces("\xf0\x9f\x98\x80\xf0\x9f\x98\x80 x"),
            (Split{"\xf0\x9f\x98\x80\xf0\x9f\x98\x80", " x"}));
  EXPECT_EQ(Pieces("  \xe3\x80\x80x"), (Split{"  ", "\xe3\x80\x80", "x"}));
  EXPECT_EQ(Pieces("\xd9\xa3" "4\xe2\x85\xab"), (Split{"\xd9\xa3" "4\xe2\x85\xab"}));
  EXPECT_EQ(Pieces(""), Split{});
}

// encoder.json and vocab.bpe for a vocabulary of the 256 byte symbols and
// the merges given (each "left right"), with ids in that order.
struct SmallVocabulary {
  std::string encoder_json;
  std::string vocab_bpe;
  std::vector<std::string> symbols;  // By id.
};

std::string ByteSymbol(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
  int code_point = b;
  if (!printable) {
    code_point = 256;
    for (int c = 0; c < b; ++c) {
      code_point += !((c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || c >= 0xae);
    }
  }
  if (code_point < 0x80) return std::string(1, static_cast<char>(code_point));
  return {static_cast<char>(0xc0 | (code_point >> 6)), static_cast<char>(0x80 | (code_point & 0x3f))};
}

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

SmallVocabulary MakeVocabulary(const std::vector<std::pair<std::string, std::string>>& merges) {
  SmallVocabulary vocabulary;
  for (int b = 0; b < 256; ++b) vocabulary.symbols.push_back(ByteSymbol(b));
  vocabulary.vocab_bpe = "#version: 0.2\n";
  for (const auto& [left, right] : merges) {
    vocabulary.symbols.push_back(left + right);
    absl::StrAppend(&vocabulary.vocab_bpe, left, " ", right, "\n");
  }
  vocabulary.encoder_json = "{";
  for (size_t id = 0; id < vocabulary.symbols.size(); ++id) {
    absl::StrAppend(&vocabulary.encoder_json, id == 0 ? "" : ", ",
                    JsonString(vocabulary.symbols[id]), ": ", id);
  }
  vocabulary.encoder_json += "}";
  return vocabulary;
}

std::unique_ptr<Gpt2Tokenizer> LoadOrDie(const SmallVocabulary& vocabulary) {
  absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> tokenizer =
      Gpt2Tokenizer::FromContents(vocabulary.encoder_json, vocabulary.vocab_bpe, "test");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

std::vector<uint32_t> EncodeOrDie(Tokenizer& tokenizer, absl::string_view text) {
  std::vector<uint32_t> ids;
  const absl::Status status = tokenizer.Encode(text, ids);
  EXPECT_TRUE(status.ok()) << status;
  return ids;
}

TEST(Gpt2TokenizerTest, MergesByRankWithinPieces) {
  // "\xc4\xa0" is the symbol of the space byte.
  const SmallVocabulary vocabulary = MakeVocabulary(
      {{"l", "l"}, {"h", "e"}, {"he", "ll"}, {"hell", "o"}, {"\xc4\xa0", "w"}});
  std::unique_ptr<Gpt2Tokenizer> tokenizer = LoadOrDie(vocabulary);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab_size(), 261);
  EXPECT_EQ(EncodeOrDie(*tokenizer, "hello"), (std::vector<uint32_t>{259}));
  // " wo" is one piece: " w" merges, "o" stays a byte; BPE never crosses
  // into the next piece.
  EXPECT_EQ(EncodeOrDie(*tokenizer, "hello wo"), (std::vector<uint32_t>{259, 260, 'o'}));
  EXPECT_EQ(EncodeOrDie(*tokenizer, "hellhello"), (std::vector<uint32_t>{258, 259}));
  // Cached pieces give the same ids the second time.
  EXPECT_EQ(EncodeOrDie(*tokenizer, "hello hello"), EncodeOrDie(*tokenizer, "hello hello"));
  const std::vector<int64_t> ids = {259, 260, 'o', 999, -1};
  EXPECT_EQ(tokenizer->Decode(ids), "hello wo??");
}

// The package looks merges up by "left,right", so the pair '",' '"' reads
// as the merge '"' ',"' and merges (Python's GPT-2 encoder would not).
TEST(Gpt2TokenizerTest, CommaKeysMergeAsInJavaScript) {
  const SmallVocabulary vocabulary =
      MakeVocabulary({{"\"", ","}, {",", "\""}, {"\"", ",\""}});
  std::unique_ptr<Gpt2Tokenizer> tokenizer = LoadOrDie(vocabulary);
  ASSERT_NE(tokenizer, nullptr);
  // '"' ',' merges first (rank 0) into '",'; then '",' '"' has rank 2.
  EXPECT_EQ(EncodeOrDie(*tokenizer, "\",\""), (std::vector<uint32_t>{258}));
}

TEST(Gpt2TokenizerTest, RefusesInvalidUtf8WithItsOffset) {
  std::unique_ptr<Gpt2Tokenizer> tokenizer = LoadOrDie(MakeVocabulary({}));
  ASSERT_NE(tokenizer, nullptr);
  std::vector<uint32_t> ids;
  const absl::Status status = tokenizer->Encode("ok \xe2\x82", ids);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "invalid UTF-8 at byte 3 (line 1): e2 82");
}

TEST(Gpt2TokenizerTest, RefusesBrokenVocabularies) {
  const SmallVocabulary good = MakeVocabulary({{"a", "b"}});
  const auto error = [](absl::string_view encoder_json, absl::string_view vocab_bpe) {
    return std::string(
        Gpt2Tokenizer::FromContents(encoder_json, vocab_bpe, "dir").status().message());
  };
  EXPECT_TRUE(absl::StrContains(error("[1, 2]", good.vocab_bpe), "not a JSON object"));
  std::string gap = good.encoder_json;
  gap.replace(gap.rfind("256"), 3, "300");
  EXPECT_TRUE(absl::StrContains(error(gap, good.vocab_bpe), "ids must be 0 to 256")) << error(gap, good.vocab_bpe);
  std::string duplicate = good.encoder_json;
  duplicate.replace(duplicate.rfind("256"), 3, "255");
  EXPECT_TRUE(absl::StrContains(error(duplicate, good.vocab_bpe), "given to two symbols"));
  std::string snowman = good.encoder_json;
  snowman.replace(snowman.rfind("\"ab\""), 4, "\"\xe2\x98\x83\"");
  EXPECT_TRUE(absl::StrContains(error(snowman, good.vocab_bpe), "stands for no byte"));
  EXPECT_TRUE(absl::StrContains(error(good.encoder_json, "#v\na b c\n"), "line 2: expected two"));
  EXPECT_TRUE(absl::StrContains(error(good.encoder_json, "#v\na c\n"), "\"ac\" is not in"));
  EXPECT_TRUE(absl::StrContains(error(good.encoder_json, "#v\na q\xc3\xa9\n"), "is not in encoder"));
}

TEST(Gpt2VocabularyLookupTest, NamesWhereItLookedAndHowToInstall) {
  const absl::StatusOr<std::string> found = FindGpt2VocabularyDir("/nonexistent/gpt2");
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(found.status().message(), "/nonexistent/gpt2"));
  EXPECT_TRUE(absl::StrContains(found.status().message(), "deploy/install-deps.sh"));
}

TEST(TokenizerSpecTest, ParsesEachForm) {
  using Source = TokenizerSpec::Source;
  EXPECT_EQ(ParseTokenizerSpec("byte")->source, Source::kByte);
  EXPECT_EQ(ParseTokenizerSpec("gpt2")->source, Source::kGpt2);
  EXPECT_EQ(ParseTokenizerSpec("gpt2")->path, "");
  EXPECT_EQ(ParseTokenizerSpec("gpt2:/v")->path, "/v");
  EXPECT_EQ(ParseTokenizerSpec("sp:2000")->sentencepiece_vocab_size, 2000);
  EXPECT_EQ(ParseTokenizerSpec("sp:2000")->source, Source::kSentencePieceTraining);
  EXPECT_EQ(ParseTokenizerSpec("sp_model:m.spm")->path, "m.spm");
  for (const char* bad : {"", "bytes", "byte:x", "gpt2:", "sp", "sp:", "sp:0", "sp:-5", "sp:1e3",
                          "sp:99999999", "sp_model:", "tiktoken"}) {
    EXPECT_EQ(ParseTokenizerSpec(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_TRUE(absl::StrContains(ParseTokenizerSpec("bpe").status().message(),
                                "expected byte, gpt2, gpt2:DIR, sp:VOCAB_SIZE or sp_model:PATH"));
}

}  // namespace
}  // namespace spotps
