// Labeled text to labeled-example files and batches: the TSV and JSONL
// rules, bad rows with their line numbers, the stratified split, the file
// format's checks and the batches' shapes and determinism.
#include "trainer/data/labeled_dataset.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "trainer/data/byte_tokenizer.h"
#include "trainer/data/labeled_builder.h"
#include "trainer/data/labeled_rows.h"
#include "trainer/data/stratified_split.h"

namespace spotps {
namespace {

std::string TempPath(absl::string_view name) {
  return absl::StrCat(::testing::TempDir(), "/trainer_labeled_dataset_test_", getpid(), "_", name);
}

void WriteRawFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

std::string ReadRawFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeByteTokenizer(
    absl::Span<const absl::string_view>) {
  return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
}

std::string ReasonOn(const LabeledRows& parsed, int64_t line) {
  for (const BadRow& bad : parsed.bad_rows) {
    if (bad.line == line) return bad.reason;
  }
  return "";
}

TEST(LabeledRowsTest, TsvEscapesHeaderAndCrlf) {
  const LabeledRows parsed = ParseLabeledRows(
      "text\tlabel\r\n"
      "tab\\there\\nnewline \\\\ slash\tpos\r\n"
      "plain\tneg\n",
      LabeledFormat::kTsv);
  ASSERT_TRUE(parsed.bad_rows.empty()) << parsed.bad_rows[0].reason;
  ASSERT_EQ(parsed.rows.size(), 2u);
  EXPECT_EQ(parsed.rows[0].line, 2);
  EXPECT_EQ(parsed.rows[0].text, "tab\there\nnewline \\ slash");
  EXPECT_EQ(parsed.rows[0].label, "pos");
  EXPECT_EQ(parsed.rows[1].text, "plain");
  EXPECT_EQ(EscapeTsvField("a\tb\nc\\d\re"), "a\\tb\\nc\\\\d\\re");
  // The header is only a header on the first line.
  EXPECT_EQ(ParseLabeledRows("x\ty\ntext\tlabel\n", LabeledFormat::kTsv).rows.size(), 2u);
}

TEST(LabeledRowsTest, TsvBadRowsSayWhatAndWhere) {
  const LabeledRows parsed = ParseLabeledRows(
      "fine\ta\n"
      "no label here\n"
      "\ta\n"
      "text\t\n"
      "two\ttabs\there\n"
      "bad \\q escape\ta\n"
      "bad \xff utf8\ta\n"
      "\n"
      "last\tb",
      LabeledFormat::kTsv);
  ASSERT_EQ(parsed.rows.size(), 2u);
  EXPECT_EQ(parsed.rows[1].line, 9);
  EXPECT_EQ(parsed.bad_rows.size(), 7u);
  EXPECT_EQ(ReasonOn(parsed, 2), "no TAB between the text and the label");
  EXPECT_EQ(ReasonOn(parsed, 3), "empty text");
  EXPECT_EQ(ReasonOn(parsed, 4), "empty label");
  EXPECT_TRUE(absl::StrContains(ReasonOn(parsed, 5), "2 TABs")) << ReasonOn(parsed, 5);
  EXPECT_TRUE(absl::StrContains(ReasonOn(parsed, 6), "unknown escape \"\\q\""));
  EXPECT_TRUE(absl::StrContains(ReasonOn(parsed, 7), "invalid UTF-8 at byte 4")) << ReasonOn(parsed, 7);
  EXPECT_EQ(ReasonOn(parsed, 8), "empty line");
}

TEST(LabeledRowsTest, Jsonl) {
  const LabeledRows parsed = ParseLabeledRows(
      "{\"text\": \"caf\\u00e9\\n\", \"label\": \"fr\", \"id\": 7}\n"
      "{\"text\": \"x\", \"label\": 3}\n"
      "{\"text\": \"x\"}\n"
      "[1, 2]\n"
      "{\"text\": 5, \"label\": \"a\"}\n"
      "{\"text\": \"x\", \"label\": 1.5}\n"
      "{not json\n",
      LabeledFormat::kJsonl);
  ASSERT_EQ(parsed.rows.size(), 2u);
  EXPECT_EQ(parsed.rows[0].text, "caf\xc3\xa9\n");
  EXPECT_EQ(parsed.rows[0].label, "fr");
  EXPECT_EQ(parsed.rows[1].label, "3");
  EXPECT_EQ(ReasonOn(parsed, 3), "no \"label\"");
  EXPECT_EQ(ReasonOn(parsed, 4), "not a JSON object");
  EXPECT_EQ(ReasonOn(parsed, 5), "no string \"text\"");
  EXPECT_EQ(ReasonOn(parsed, 6), "\"label\" is neither a string nor an integer");
  EXPECT_EQ(ReasonOn(parsed, 7), "not valid JSON");
  EXPECT_EQ(LabeledFormatOfPath("a.jsonl").value(), LabeledFormat::kJsonl);
  EXPECT_FALSE(LabeledFormatOfPath("a.csv").ok());
}

// Each label's held-out count is within one example of its share of the
// held-out total, and every label keeps a training example.
TEST(StratifiedSplitTest, KeepsEachLabelsShare) {
  const std::vector<int64_t> counts = {500, 120, 37, 9, 2, 1};
  std::vector<int32_t> labels;
  for (size_t l = 0; l < counts.size(); ++l) labels.insert(labels.end(), counts[l], l);
  for (double fraction : {0.05, 0.1, 0.25}) {
    const std::vector<bool> held_out = StratifiedValidationSplit(labels, 6, fraction, 42);
    std::vector<int64_t> val(counts.size(), 0);
    int64_t total = 0;
    for (size_t i = 0; i < labels.size(); ++i) {
      if (held_out[i]) ++val[labels[i]], ++total;
    }
    EXPECT_NEAR(total, fraction * labels.size(), 1.0);
    for (size_t l = 0; l < counts.size(); ++l) {
      const double share = static_cast<double>(counts[l]) * total / labels.size();
      EXPECT_LE(std::abs(val[l] - share), 1.0) << "label " << l << " fraction " << fraction;
      EXPECT_LT(val[l], counts[l]) << "label " << l << " has no training example";
    }
  }
  // The same seed picks the same examples; another seed others.
  EXPECT_EQ(StratifiedValidationSplit(labels, 6, 0.1, 1),
            StratifiedValidationSplit(labels, 6, 0.1, 1));
  EXPECT_NE(StratifiedValidationSplit(labels, 6, 0.1, 1),
            StratifiedValidationSplit(labels, 6, 0.1, 2));
}

class LabeledBuildTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }
  std::string Path(absl::string_view name) {
    paths_.push_back(TempPath(absl::StrCat(
        ::testing::UnitTest::GetInstance()->current_test_info()->name(), "_", name)));
    return paths_.back();
  }
  // Row i (0 to 99) is "<i><TAB><1 + i % 40 letters>", labeled "alpha"
  // (60 rows), "beta" (30) or "gamma" (10) by i % 10.
  static std::string RowText(int i) {
    return absl::StrCat(i, "\t", std::string(1 + i % 40, static_cast<char>('a' + i % 26)));
  }
  static int64_t RowLabel(int i) { return i % 10 < 6 ? 0 : i % 10 < 9 ? 1 : 2; }
  std::string GoodTsv() {
    const char* names[] = {"alpha", "beta", "gamma"};
    std::string tsv = "text\tlabel\n";
    for (int i = 0; i < 100; ++i) {
      absl::StrAppend(&tsv, EscapeTsvField(RowText(i)), "\t", names[RowLabel(i)], "\n");
    }
    return tsv;
  }
  absl::StatusOr<LabeledBuildReport> Build(const std::string& contents,
                                           const LabeledBuildOptions& options,
                                           absl::string_view extension = ".tsv") {
    const std::string input = Path(absl::StrCat("input", extension));
    output_ = Path("output.labeled");
    WriteRawFile(input, contents);
    input_ = input;
    return BuildLabeledFile(input, output_, options, MakeByteTokenizer);
  }

  std::vector<std::string> paths_;
  std::string input_;
  std::string output_;
};

TEST_F(LabeledBuildTest, WritesWhatDatasetReads) {
  LabeledBuildOptions options;
  options.seq_len = 16;
  options.val_fraction = 0.2;
  absl::StatusOr<LabeledBuildReport> report = Build(GoodTsv(), options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->header.num_train + report->header.num_val, 100u);
  EXPECT_EQ(report->val_per_label, (std::vector<int64_t>{12, 6, 2}));
  int64_t longer_than_16 = 0;
  for (int i = 0; i < 100; ++i) longer_than_16 += RowText(i).size() > 16;
  EXPECT_EQ(report->truncated_examples, longer_than_16);

  absl::StatusOr<LabeledDataset> dataset = LabeledDataset::Open(output_);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_EQ(dataset->num_classes(), 3);
  EXPECT_EQ(dataset->label_names(), (std::vector<std::string>{"alpha", "beta", "gamma"}));
  EXPECT_EQ(dataset->num_train_examples(), 80);
  EXPECT_EQ(dataset->num_val_examples(), 20);
  EXPECT_EQ(dataset->seq_len(), 16);
  EXPECT_EQ(dataset->header().tokenizer.kind, TokenizerKind::kByte);
  EXPECT_EQ(dataset->header().padding_id, 0u);

  // The first validation example is, in input order, the first row held
  // out: its bytes, then padding under a zero mask.
  const LabeledBatch batch = *dataset->ValidationBatch(0, 4);
  EXPECT_EQ(batch.input_ids.sizes(), (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(batch.attention_mask.sizes(), (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(batch.labels.sizes(), (std::vector<int64_t>{4}));
  for (int64_t b = 0; b < 4; ++b) {
    const int64_t length = batch.attention_mask[b].sum().item<int64_t>();
    ASSERT_GE(length, 1);
    for (int64_t t = 0; t < 16; ++t) {
      EXPECT_EQ(batch.attention_mask[b][t].item<int64_t>(), t < length ? 1 : 0);
      if (t >= length) {
        EXPECT_EQ(batch.input_ids[b][t].item<int64_t>(), 0);
      }
    }
    // The text is its row's (cut to 16 bytes) and the label the row's.
    const std::string text = BytesFromTokens(
        {batch.input_ids[b].data_ptr<int64_t>(), static_cast<size_t>(length)});
    const int row = std::stoi(text.substr(0, text.find('\t')));
    EXPECT_EQ(text, RowText(row).substr(0, 16));
    EXPECT_EQ(batch.labels[b].item<int64_t>(), RowLabel(row)) << text;
  }
}

TEST_F(LabeledBuildTest, ValidationBatchesCoverTheSplitOnce) {
  LabeledBuildOptions options;
  options.seq_len = 64;
  options.val_fraction = 0.2;
  ASSERT_TRUE(Build(GoodTsv(), options).ok());
  LabeledDataset dataset = *LabeledDataset::Open(output_);
  EXPECT_EQ(dataset.NumValidationBatches(6), 4);
  std::set<std::string> seen;
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < dataset.NumValidationBatches(6); ++i) {
    const LabeledBatch batch = *dataset.ValidationBatch(i, 6);
    sizes.push_back(batch.labels.size(0));
    for (int64_t b = 0; b < batch.labels.size(0); ++b) {
      seen.insert(BytesFromTokens({batch.input_ids[b].data_ptr<int64_t>(), 64}));
    }
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{6, 6, 6, 2}));
  EXPECT_EQ(seen.size(), 20u);
  EXPECT_EQ(dataset.ValidationBatch(4, 6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dataset.ValidationBatch(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LabeledBuildTest, TrainBatchesArePureFunctionsOfSeedAndUnit) {
  LabeledBuildOptions options;
  options.seq_len = 32;
  ASSERT_TRUE(Build(GoodTsv(), options).ok());
  LabeledDataset dataset = *LabeledDataset::Open(output_);
  LabeledDataset reopened = *LabeledDataset::Open(output_);
  const LabeledBatch a = *dataset.TrainBatch(5, 9, 8);
  const LabeledBatch same = *reopened.TrainBatch(5, 9, 8);
  const LabeledBatch other = *dataset.TrainBatch(5, 10, 8);
  EXPECT_TRUE(torch::equal(a.input_ids, same.input_ids));
  EXPECT_TRUE(torch::equal(a.attention_mask, same.attention_mask));
  EXPECT_TRUE(torch::equal(a.labels, same.labels));
  EXPECT_FALSE(torch::equal(a.input_ids, other.input_ids));
  EXPECT_EQ(a.labels.scalar_type(), torch::kLong);
  EXPECT_EQ(dataset.TrainBatch(0, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LabeledBuildTest, BadRowsRefuseTheFileNamingEachLine) {
  std::string tsv = GoodTsv();
  tsv += "no label\n";            // Line 102.
  tsv += "typo\talpah\n";         // Line 103: a label on one row only.
  tsv += "bad \xc3\x28\tbeta\n";  // Line 104.
  LabeledBuildOptions options;
  absl::StatusOr<LabeledBuildReport> refused = Build(tsv, options);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(refused.status().message());
  EXPECT_TRUE(absl::StrContains(message, "3 bad rows")) << message;
  EXPECT_TRUE(absl::StrContains(message, absl::StrCat(input_, ":102: no TAB"))) << message;
  EXPECT_TRUE(absl::StrContains(message, absl::StrCat(input_, ":103: label \"alpah\" is on this row only")))
      << message;
  EXPECT_TRUE(absl::StrContains(message, absl::StrCat(input_, ":104: invalid UTF-8"))) << message;
  EXPECT_FALSE(std::ifstream(output_).good()) << "nothing is written for a refused file";

  options.skip_bad_rows = true;
  absl::StatusOr<LabeledBuildReport> report = Build(tsv, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->skipped_rows, 3);
  EXPECT_EQ(report->header.label_names.size(), 3u);
  EXPECT_TRUE(absl::StrContains(report->Summary(), "3 bad rows skipped")) << report->Summary();
}

TEST_F(LabeledBuildTest, NeedsTwoLabelsAndSaneOptions) {
  LabeledBuildOptions options;
  EXPECT_EQ(Build("a\tx\nb\tx\n", options).status().code(), absl::StatusCode::kInvalidArgument);
  options.seq_len = 0;
  EXPECT_EQ(Build(GoodTsv(), options).status().code(), absl::StatusCode::kInvalidArgument);
  options.seq_len = 8;
  options.val_fraction = 1.0;
  EXPECT_EQ(Build(GoodTsv(), options).status().code(), absl::StatusCode::kInvalidArgument);
  options.val_fraction = 0.1;
  EXPECT_EQ(Build(GoodTsv(), options, ".csv").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LabeledBuildTest, ReadsJsonl) {
  std::string jsonl;
  for (int i = 0; i < 20; ++i) {
    absl::StrAppend(&jsonl, "{\"text\": \"example ", i, "\", \"label\": ", i % 2, "}\n");
  }
  LabeledBuildOptions options;
  options.seq_len = 12;
  absl::StatusOr<LabeledBuildReport> report = Build(jsonl, options, ".jsonl");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->header.label_names, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(report->val_per_label, (std::vector<int64_t>{1, 1}));
}

class LabeledFileCorruptionTest : public LabeledBuildTest {
 protected:
  void SetUp() override {
    LabeledBuildOptions options;
    options.seq_len = 24;
    ASSERT_TRUE(Build(GoodTsv(), options).ok());
    contents_ = ReadRawFile(output_);
    header_bytes_ = LabeledDataset::Open(output_)->header().payload_offset;
  }
  absl::Status OpenWith(const std::string& contents) {
    WriteRawFile(output_, contents);
    return LabeledDataset::Open(output_).status();
  }
  std::string contents_;
  uint64_t header_bytes_ = 0;
};

TEST_F(LabeledFileCorruptionTest, TruncatedFileIsDataLoss) {
  const absl::Status status = OpenWith(contents_.substr(0, contents_.size() - 3));
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(status.message(), "truncated")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), output_)) << status;
  EXPECT_EQ(OpenWith(contents_.substr(0, 20)).code(), absl::StatusCode::kDataLoss);
}

TEST_F(LabeledFileCorruptionTest, FlippedBytesAreDataLoss) {
  std::string payload_flip = contents_;
  payload_flip[header_bytes_ + 100] ^= 0x10;
  const absl::Status payload = OpenWith(payload_flip);
  EXPECT_EQ(payload.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(payload.message(), "payload is corrupt")) << payload;

  std::string header_flip = contents_;
  header_flip[header_bytes_ - 20] ^= 0x01;  // In the label names or counts.
  const absl::Status header = OpenWith(header_flip);
  EXPECT_EQ(header.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(header.message(), "header is corrupt")) << header;
}

TEST_F(LabeledFileCorruptionTest, ForeignOrNewerFilesAreInvalidArgument) {
  EXPECT_EQ(OpenWith(std::string(100, 'x')).code(), absl::StatusCode::kInvalidArgument);
  std::string newer = contents_;
  newer[8] = 2;
  const absl::Status status = OpenWith(newer);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "version 2")) << status;
}

}  // namespace
}  // namespace spotps
