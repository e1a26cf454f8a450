#include "trainer/data/token_dataset.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "trainer/data/byte_tokenizer.h"
#include "trainer/data/fnv1a.h"
#include "trainer/data/token_file.h"

namespace spotps {
namespace {

std::string TempPath(absl::string_view name) {
  return absl::StrCat(::testing::TempDir(), "/trainer_token_dataset_test_", getpid(), "_", name);
}

// Text with enough variety that distinct windows almost never coincide.
std::string GeneratedText(size_t bytes) {
  std::string text;
  uint32_t state = 12345;
  while (text.size() < bytes) {
    state = state * 1664525u + 1013904223u;
    text.push_back(static_cast<char>(' ' + (state >> 24) % 90));
  }
  return text;
}

std::vector<uint32_t> Tokens(absl::string_view text) {
  std::vector<uint32_t> tokens;
  AppendByteTokens(text, tokens);
  return tokens;
}

TokenizerIdentity ByteIdentity() { return TokenizerIdentity(); }

TokenizerIdentity WideIdentity(uint32_t vocab_size) {
  TokenizerIdentity identity;
  identity.kind = TokenizerKind::kSentencePiece;
  identity.vocab_size = vocab_size;
  identity.vocabulary_hash = 0x1234;
  identity.model_file = "wide.spm";
  return identity;
}

// The bytes a row of token ids stands for.
std::string WindowText(const torch::Tensor& row) {
  const torch::Tensor ids = row.contiguous();
  return BytesFromTokens({ids.data_ptr<int64_t>(), static_cast<size_t>(ids.numel())});
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

void WriteRawFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

// Recomputes a framed file's checksums (framed_file.h) after an edit, so
// that the checks behind them are what a test meets.
void ResealFrame(std::string& contents, size_t header_bytes) {
  const uint64_t payload = Fnv1a64(absl::string_view(contents).substr(header_bytes));
  for (int i = 0; i < 8; ++i) contents[24 + i] = static_cast<char>(payload >> (8 * i));
  for (int i = 0; i < 8; ++i) contents[32 + i] = 0;
  const uint64_t header = Fnv1a64(absl::string_view(contents).substr(0, header_bytes));
  for (int i = 0; i < 8; ++i) contents[32 + i] = static_cast<char>(header >> (8 * i));
}

class TokenDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TempPath(::testing::UnitTest::GetInstance()->current_test_info()->name());
    text_ = GeneratedText(20000);
    absl::StatusOr<TokenFileHeader> header =
        WriteTokenFile(path_, Tokens(text_), ByteIdentity(), 0.05);
    ASSERT_TRUE(header.ok()) << header.status();
    header_ = *header;
  }
  void TearDown() override { std::remove(path_.c_str()); }

  TokenDataset OpenOrDie() {
    absl::StatusOr<TokenDataset> dataset = TokenDataset::Open(path_);
    EXPECT_TRUE(dataset.ok()) << dataset.status();
    return *std::move(dataset);
  }

  std::string path_;
  std::string text_;
  TokenFileHeader header_;
};

TEST_F(TokenDatasetTest, RoundTripKeepsSplitAndTokens) {
  TokenDataset dataset = OpenOrDie();
  EXPECT_EQ(dataset.vocab_size(), 256);
  EXPECT_EQ(dataset.num_val_tokens(), 1000);  // 5% of 20000, from the end.
  EXPECT_EQ(dataset.num_train_tokens(), 19000);

  // A single validation window starting at 0 must reproduce the text that
  // follows the train split byte for byte.
  absl::StatusOr<ValidationBatchIterator> batches = dataset.ValidationBatches(1, 100, 1);
  ASSERT_TRUE(batches.ok()) << batches.status();
  std::optional<TokenBatch> batch = batches->Next();
  ASSERT_TRUE(batch.has_value());
  for (int64_t t = 0; t < 100; ++t) {
    EXPECT_EQ(batch->inputs[0][t].item<int64_t>(), static_cast<unsigned char>(text_[19000 + t]));
  }
  EXPECT_FALSE(batches->Next().has_value());
  // The atomic writer's temporary file is gone.
  EXPECT_FALSE(std::ifstream(absl::StrCat(path_, ".tmp.", getpid())).good());
}

TEST_F(TokenDatasetTest, TargetsAreInputsShiftedByOne) {
  TokenDataset dataset = OpenOrDie();
  absl::StatusOr<TokenBatch> batch = dataset.TrainBatch(1, 2, 8, 32);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->inputs.sizes(), (std::vector<int64_t>{8, 32}));
  EXPECT_EQ(batch->inputs.scalar_type(), torch::kLong);
  EXPECT_EQ(batch->targets.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(batch->inputs.slice(1, 1), batch->targets.slice(1, 0, 31)));
  // And each window, with its final target, is a slice of the train split.
  const std::string window =
      WindowText(batch->inputs[0]) + WindowText(batch->targets[0].slice(0, 31));
  const size_t at = text_.find(window);
  ASSERT_NE(at, std::string::npos);
  EXPECT_LE(at + window.size(), 19000u);
}

TEST_F(TokenDatasetTest, TrainBatchesAreDeterministicPerUnit) {
  TokenDataset dataset = OpenOrDie();
  TokenDataset reopened = OpenOrDie();
  const TokenBatch a = *dataset.TrainBatch(7, 3, 4, 64);
  const TokenBatch same = *reopened.TrainBatch(7, 3, 4, 64);
  const TokenBatch other_unit = *dataset.TrainBatch(7, 4, 4, 64);
  const TokenBatch other_seed = *dataset.TrainBatch(8, 3, 4, 64);
  EXPECT_TRUE(torch::equal(a.inputs, same.inputs));
  EXPECT_TRUE(torch::equal(a.targets, same.targets));
  EXPECT_FALSE(torch::equal(a.inputs, other_unit.inputs));
  EXPECT_FALSE(torch::equal(a.inputs, other_seed.inputs));
  // Samples within one unit are different windows, too.
  EXPECT_FALSE(torch::equal(a.inputs[0], a.inputs[1]));
}

TEST_F(TokenDatasetTest, ValidationBatchesCoverSplitWithoutOverlap) {
  TokenDataset dataset = OpenOrDie();
  // 1000 validation tokens hold (1000 - 1) / 100 = 9 windows of 100.
  absl::StatusOr<ValidationBatchIterator> batches = dataset.ValidationBatches(4, 100, 100);
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ(batches->num_windows(), 9);
  EXPECT_EQ(batches->num_batches(), 3);
  std::vector<int64_t> batch_sizes;
  std::vector<size_t> starts;  // Offsets into the validation split.
  while (std::optional<TokenBatch> batch = batches->Next()) {
    batch_sizes.push_back(batch->inputs.size(0));
    for (int64_t b = 0; b < batch->inputs.size(0); ++b) {
      const size_t at = text_.find(WindowText(batch->inputs[b]), 19000);
      ASSERT_NE(at, std::string::npos);
      starts.push_back(at - 19000);
    }
  }
  EXPECT_EQ(batch_sizes, (std::vector<int64_t>{4, 4, 1}));
  ASSERT_EQ(starts.size(), 9u);
  EXPECT_EQ(starts.front(), 0u);
  EXPECT_EQ(starts.back(), 1000u - 1 - 100);  // Ends at the last token.
  for (size_t k = 0; k + 1 < starts.size(); ++k) {
    EXPECT_GE(starts[k + 1], starts[k] + 100) << "windows overlap at " << k;
  }

  // A second pass yields the very same batches.
  const TokenBatch first = *dataset.ValidationBatches(4, 100, 100)->Next();
  const TokenBatch repeat = *dataset.ValidationBatches(4, 100, 100)->Next();
  EXPECT_TRUE(torch::equal(first.inputs, repeat.inputs));
}

TEST_F(TokenDatasetTest, ValidationCapSpreadsWindowsOverSplit) {
  TokenDataset dataset = OpenOrDie();
  absl::StatusOr<ValidationBatchIterator> capped = dataset.ValidationBatches(2, 100, 1);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->num_batches(), 1);
  const TokenBatch batch = *capped->Next();
  EXPECT_EQ(batch.inputs.size(0), 2);
  EXPECT_EQ(batch.inputs[0][0].item<int64_t>(), static_cast<unsigned char>(text_[19000]));
  EXPECT_EQ(batch.targets[1][99].item<int64_t>(), static_cast<unsigned char>(text_.back()));
}

TEST_F(TokenDatasetTest, RejectsRequestsLargerThanSplit) {
  TokenDataset dataset = OpenOrDie();
  EXPECT_EQ(dataset.ValidationBatches(1, 1000, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(dataset.TrainBatch(0, 0, 1, 19000).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(dataset.TrainBatch(0, 0, 1, 18999).ok());
  EXPECT_EQ(dataset.TrainBatch(0, 0, 0, 8).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TokenDatasetTest, TruncatedFileIsRejected) {
  const std::string contents = ReadFile(path_);
  WriteRawFile(path_, contents.substr(0, contents.size() - 1));
  absl::StatusOr<TokenDataset> dataset = TokenDataset::Open(path_);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(dataset.status().message(), "truncated")) << dataset.status();

  WriteRawFile(path_, contents.substr(0, 10));
  EXPECT_EQ(TokenDataset::Open(path_).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(TokenDatasetTest, CorruptPayloadIsRejected) {
  std::string contents = ReadFile(path_);
  contents[header_.payload_offset + 500] ^= 0x01;
  WriteRawFile(path_, contents);
  absl::StatusOr<TokenDataset> dataset = TokenDataset::Open(path_);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(dataset.status().message(), "checksum")) << dataset.status();
  EXPECT_TRUE(absl::StrContains(dataset.status().message(), path_));
}

TEST_F(TokenDatasetTest, ForeignFileIsRejected) {
  WriteRawFile(path_, std::string(64, 'x'));
  EXPECT_EQ(TokenDataset::Open(path_).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenDataset::Open(path_ + ".missing").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TokenDatasetTest, CorruptHeaderIsRejected) {
  std::string contents = ReadFile(path_);
  contents[44] ^= 0x01;  // In the tokenizer fields.
  WriteRawFile(path_, contents);
  absl::StatusOr<TokenDataset> dataset = TokenDataset::Open(path_);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(dataset.status().message(), "header is corrupt"))
      << dataset.status();
}

TEST_F(TokenDatasetTest, HeaderSaysWhatItHolds) {
  TokenDataset dataset = OpenOrDie();
  const TokenFileHeader& header = dataset.header();
  EXPECT_EQ(header.version, 2u);
  EXPECT_EQ(header.tokenizer.kind, TokenizerKind::kByte);
  EXPECT_EQ(header.token_bytes, 2u);
  EXPECT_EQ(header.max_token_id,
            static_cast<uint32_t>(static_cast<unsigned char>(
                *std::max_element(text_.begin(), text_.end()))));
  EXPECT_EQ(header.payload_offset % 8, 0u);
  EXPECT_EQ(dataset.path(), path_);
}

// A model must cover every id; the message names file, ids, tokenizer and model.
TEST_F(TokenDatasetTest, CheckFitsModelNamesWhatDoesNotFit) {
  TokenDataset dataset = OpenOrDie();
  const int64_t largest = dataset.header().max_token_id;
  EXPECT_TRUE(CheckTokenFileFitsModel(path_, dataset.header(), largest + 1).ok());
  const absl::Status status = CheckTokenFileFitsModel(path_, dataset.header(), largest);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            absl::StrCat("token file ", path_, " holds ids up to ", largest,
                         " (byte tokenizer), but the model's vocabulary has ", largest,
                         " entries"));
}

// Files written before the header named the tokenizer still read, as bytes.
TEST(TokenFileTest, ReadsVersion1Files) {
  const std::string text = GeneratedText(1000);
  std::string payload;
  for (char c : text) payload += std::string{c, '\0'};
  std::string contents = "SPTOKENS";
  const auto put = [&contents](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) contents.push_back(static_cast<char>(value >> (8 * i)));
  };
  put(1, 4);
  put(256, 4);
  put(900, 8);
  put(100, 8);
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64 of the payload.
  for (unsigned char byte : payload) hash = (hash ^ byte) * 0x100000001b3ull;
  put(hash, 8);
  contents += payload;
  const std::string path = TempPath("v1");
  WriteRawFile(path, contents);
  absl::StatusOr<TokenDataset> dataset = TokenDataset::Open(path);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->header().version, 1u);
  EXPECT_EQ(dataset->header().tokenizer.kind, TokenizerKind::kByte);
  EXPECT_EQ(dataset->num_train_tokens(), 900);
  EXPECT_EQ(dataset->num_val_tokens(), 100);
  const TokenBatch batch = *dataset->ValidationBatches(1, 50, 1)->Next();
  EXPECT_EQ(WindowText(batch.inputs[0]), text.substr(900, 50));

  contents[40 + 20] ^= 0x01;
  WriteRawFile(path, contents);
  EXPECT_EQ(TokenDataset::Open(path).status().code(), absl::StatusCode::kDataLoss);
  std::remove(path.c_str());
}

// Vocabularies past 65536 store uint32 ids; batches read them whole.
TEST(TokenFileTest, WideVocabulariesStoreUint32) {
  std::vector<uint32_t> tokens;
  for (uint32_t i = 0; i < 5000; ++i) tokens.push_back((i * 7919u) % 99999u);
  const std::string path = TempPath("wide");
  absl::StatusOr<TokenFileHeader> header = WriteTokenFile(path, tokens, WideIdentity(100000), 0.1);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->token_bytes, 4u);
  absl::StatusOr<TokenDataset> dataset = TokenDataset::Open(path);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->header().tokenizer.model_file, "wide.spm");
  EXPECT_EQ(dataset->header().tokenizer.vocabulary_hash, 0x1234u);
  EXPECT_EQ(dataset->header().max_token_id, *std::max_element(tokens.begin(), tokens.end()));
  const TokenBatch batch = *dataset->ValidationBatches(1, 10, 1)->Next();
  for (int t = 0; t < 10; ++t) {
    EXPECT_EQ(batch.inputs[0][t].item<int64_t>(), tokens[4500 + t]);
  }
  std::remove(path.c_str());
}

// nanoGPT's .bin: bare little-endian uint16 ids, the last 5% validation.
TEST(TokenFileTest, ReadsRawUint16Files) {
  std::string contents;
  for (int i = 0; i < 2000; ++i) {
    const uint16_t id = static_cast<uint16_t>(50000 + i % 257);
    contents += std::string{static_cast<char>(id & 0xff), static_cast<char>(id >> 8)};
  }
  const std::string path = TempPath("raw.bin");
  WriteRawFile(path, contents);
  EXPECT_EQ(ParseTokenFileFormat("raw_u16").value(), TokenFileFormat::kRawU16);
  EXPECT_FALSE(ParseTokenFileFormat("npy").ok());
  absl::StatusOr<TokenDataset> dataset = TokenDataset::Open(path, TokenFileFormat::kRawU16);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->num_train_tokens(), 1900);
  EXPECT_EQ(dataset->num_val_tokens(), 100);
  EXPECT_EQ(dataset->header().max_token_id, 50256u);
  EXPECT_EQ(dataset->header().tokenizer.kind, TokenizerKind::kUnknown);
  const TokenBatch batch = *dataset->TrainBatch(1, 1, 2, 8);
  EXPECT_GE(batch.inputs.min().item<int64_t>(), 50000);
  EXPECT_TRUE(absl::StrContains(CheckTokenFileFitsModel(path, dataset->header(), 50000).message(),
                                "holds ids up to 50256 (raw_u16 file)"));

  WriteRawFile(path, contents.substr(1));
  const absl::Status odd = TokenDataset::Open(path, TokenFileFormat::kRawU16).status();
  EXPECT_EQ(odd.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(odd.message(), "odd size")) << odd;
  std::remove(path.c_str());
}

TEST(TokenFileTest, RejectsTokensOutsideVocabulary) {
  const std::vector<uint32_t> tokens = {1, 2, 300};
  const std::string path = TempPath("vocab");
  EXPECT_EQ(WriteTokenFile(path, tokens, ByteIdentity(), 0.0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteTokenFile(path, tokens, WideIdentity(512), 1.0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(WriteTokenFile(path, tokens, WideIdentity(512), 0.0).ok());
  std::remove(path.c_str());
}

// The header's largest id is checked against the payload: a file that
// claims less than it holds could index past a model's embedding table.
TEST(TokenFileTest, RejectsLargestIdThatDisagreesWithPayload) {
  const std::string path = TempPath("largest");
  ASSERT_TRUE(WriteTokenFile(path, std::vector<uint32_t>{1, 2, 3}, ByteIdentity(), 0.0).ok());
  std::string contents = ReadFile(path);
  absl::StatusOr<TokenFileHeader> header = ParseTokenFile(
      absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(contents.data()), contents.size()));
  ASSERT_TRUE(header.ok());
  contents[header->payload_offset + 4] = 9;  // 3 -> 9.
  ResealFrame(contents, header->payload_offset);
  WriteRawFile(path, contents);
  const absl::Status status = TokenDataset::Open(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(status.message(), "largest id is 9, its header says 3")) << status;
  std::remove(path.c_str());
}

TEST(ByteTokenizerTest, RoundTripsAllBytes) {
  std::string text;
  for (int b = 0; b < 256; ++b) text.push_back(static_cast<char>(b));
  const std::vector<uint32_t> tokens = Tokens(text);
  ASSERT_EQ(tokens.size(), 256u);
  EXPECT_EQ(tokens[200], 200);
  const std::vector<int64_t> ids(tokens.begin(), tokens.end());
  EXPECT_EQ(BytesFromTokens(ids), text);
  const std::vector<int64_t> out_of_range = {'o', 'k', 999};
  EXPECT_EQ(BytesFromTokens(out_of_range), "ok?");
}

}  // namespace
}  // namespace spotps
