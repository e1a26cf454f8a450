// spotps-tokenize: turns text files into the byte-level token file the
// trainer maps (see token_file.h). Run once per corpus.
//
//   spotps-tokenize --input=a.txt,b.txt --output=corpus.tokens
//                   --val_fraction=0.05

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/command_line.h"
#include "common/exit_status.h"
#include "common/log.h"
#include "trainer/data/byte_tokenizer.h"
#include "trainer/data/mapped_file.h"
#include "trainer/data/token_file.h"

ABSL_FLAG(std::vector<std::string>, input, {},
          "Comma-separated text files, concatenated in this order.");
ABSL_FLAG(std::string, output, "", "Token file to write (atomically).");
ABSL_FLAG(double, val_fraction, 0.05,
          "Fraction of tokens, taken from the end, held out for validation.");

namespace spotps {
namespace {

absl::Status AppendFileTokens(const std::string& path, std::vector<uint16_t>& tokens) {
  absl::StatusOr<ReadOnlyMappedFile> file = ReadOnlyMappedFile::Open(path);
  if (!file.ok()) return file.status();
  const absl::Span<const uint8_t> bytes = file->bytes();
  AppendByteTokens(absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                   tokens);
  std::printf("read %s: %zu bytes (%zu tokens so far)\n", path.c_str(), bytes.size(),
              tokens.size());
  return absl::OkStatus();
}

absl::Status Tokenize(const std::vector<std::string>& inputs, const std::string& output,
                      double val_fraction) {
  if (inputs.empty() || output.empty()) {
    return absl::InvalidArgumentError("--input and --output are required");
  }
  std::vector<uint16_t> tokens;
  for (const std::string& input : inputs) {
    if (absl::Status status = AppendFileTokens(input, tokens); !status.ok()) {
      return status;
    }
  }
  absl::StatusOr<TokenFileHeader> header =
      WriteTokenFile(output, tokens, kByteVocabSize, val_fraction);
  if (!header.ok()) return header.status();
  std::printf(
      "spotps-tokenize: wrote %s: train_tokens=%llu val_tokens=%llu "
      "vocab_size=%u checksum=%016llx\n",
      output.c_str(), static_cast<unsigned long long>(header->num_train_tokens),
      static_cast<unsigned long long>(header->num_val_tokens), header->vocab_size,
      static_cast<unsigned long long>(header->payload_checksum));
  return absl::OkStatus();
}

}  // namespace
}  // namespace spotps

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Tokenizes text files (byte-level) into a spotps token file.\n"
      "  spotps-tokenize --input=a.txt,b.txt --output=corpus.tokens");
  spotps::SetLogProgramName("spotps-tokenize");
  spotps::ParseFlagsOrExit(argc, argv);
  if (absl::GetFlag(FLAGS_input).empty() || absl::GetFlag(FLAGS_output).empty()) {
    return spotps::UsageError(absl::InvalidArgumentError("--input and --output are required"));
  }
  if (spotps::CheckFlagsOnly()) return spotps::kExitSuccess;
  const absl::Status status = spotps::Tokenize(
      absl::GetFlag(FLAGS_input), absl::GetFlag(FLAGS_output), absl::GetFlag(FLAGS_val_fraction));
  if (!status.ok()) return spotps::RuntimeError(status);
  return spotps::kExitSuccess;
}
