#include "trainer/data/tokenizer_factory.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/posix_file.h"
#include "trainer/data/byte_tokenizer.h"
#include "trainer/data/gpt2_bpe.h"

namespace spotps {
namespace {

// Ids must fit the token files' uint32 and a model's embedding table.
constexpr int kMaxSentencePieceVocabSize = 1 << 22;

absl::Status BadSpec(absl::string_view spec, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--tokenizer=", spec, ": ", why,
      " (expected byte, gpt2, gpt2:DIR, sp:VOCAB_SIZE or sp_model:PATH)"));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> OpenGpt2(const std::string& dir) {
  absl::StatusOr<std::string> found = FindGpt2VocabularyDir(dir);
  if (!found.ok()) return found.status();
  absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> tokenizer = Gpt2Tokenizer::Load(*found);
  if (!tokenizer.ok()) return tokenizer.status();
  return std::unique_ptr<Tokenizer>(*std::move(tokenizer));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> OpenByIdentity(const TokenizerIdentity& identity,
                                                          const std::string& data_file_path) {
  switch (identity.kind) {
    case TokenizerKind::kByte:
      return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
    case TokenizerKind::kGpt2:
      return OpenGpt2("");
    case TokenizerKind::kSentencePiece: {
      auto tokenizer = SentencePieceTokenizer::Load(
          absl::StrCat(DirectoryOf(data_file_path), "/", identity.model_file));
      if (!tokenizer.ok()) return tokenizer.status();
      return std::unique_ptr<Tokenizer>(*std::move(tokenizer));
    }
    case TokenizerKind::kUnknown:
      break;
  }
  return absl::FailedPreconditionError(
      absl::StrCat(data_file_path, " does not say which tokenizer made its ids (raw_u16?)"));
}

}  // namespace

absl::StatusOr<TokenizerSpec> ParseTokenizerSpec(absl::string_view spec) {
  TokenizerSpec parsed;
  const size_t colon = spec.find(':');
  const absl::string_view name = spec.substr(0, colon);
  const absl::string_view argument =
      colon == absl::string_view::npos ? absl::string_view() : spec.substr(colon + 1);
  const bool has_argument = colon != absl::string_view::npos;
  if (name == "byte" && !has_argument) {
    parsed.source = TokenizerSpec::Source::kByte;
  } else if (name == "gpt2") {
    parsed.source = TokenizerSpec::Source::kGpt2;
    if (has_argument && argument.empty()) return BadSpec(spec, "empty directory");
    parsed.path = std::string(argument);
  } else if (name == "sp" && has_argument) {
    parsed.source = TokenizerSpec::Source::kSentencePieceTraining;
    if (!absl::SimpleAtoi(argument, &parsed.sentencepiece_vocab_size) ||
        parsed.sentencepiece_vocab_size <= 0 ||
        parsed.sentencepiece_vocab_size > kMaxSentencePieceVocabSize) {
      return BadSpec(spec, absl::StrCat("the vocabulary size must be an integer in [1, ",
                                        kMaxSentencePieceVocabSize, "]"));
    }
  } else if (name == "sp_model" && has_argument && !argument.empty()) {
    parsed.source = TokenizerSpec::Source::kSentencePieceModel;
    parsed.path = std::string(argument);
  } else {
    return BadSpec(spec, "unknown tokenizer");
  }
  return parsed;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(
    const TokenizerSpec& spec, absl::Span<const absl::string_view> training_texts,
    SentencePieceModelType model_type) {
  using Source = TokenizerSpec::Source;
  switch (spec.source) {
    case Source::kByte:
      return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
    case Source::kGpt2:
      return OpenGpt2(spec.path);
    case Source::kSentencePieceTraining: {
      auto tokenizer = SentencePieceTokenizer::Train(training_texts,
                                                     spec.sentencepiece_vocab_size, model_type);
      if (!tokenizer.ok()) return tokenizer.status();
      return std::unique_ptr<Tokenizer>(*std::move(tokenizer));
    }
    case Source::kSentencePieceModel: {
      auto tokenizer = SentencePieceTokenizer::Load(spec.path);
      if (!tokenizer.ok()) return tokenizer.status();
      return std::unique_ptr<Tokenizer>(*std::move(tokenizer));
    }
  }
  return absl::InternalError("unhandled tokenizer source");
}

absl::StatusOr<std::string> SaveModelBeside(const Tokenizer& tokenizer,
                                            const std::string& data_file_path) {
  const auto* sentencepiece = dynamic_cast<const SentencePieceTokenizer*>(&tokenizer);
  if (sentencepiece == nullptr) return std::string();
  const std::string model_path = data_file_path + ".spm";
  std::string name = model_path.substr(model_path.rfind('/') + 1);
  if (absl::Status status = CheckModelFileName(name); !status.ok()) return status;
  if (absl::Status status = WriteFileAtomically(model_path, sentencepiece->serialized_model());
      !status.ok()) {
    return status;
  }
  return name;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> OpenTokenizerOf(const TokenizerIdentity& identity,
                                                           const std::string& data_file_path) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      OpenByIdentity(identity, data_file_path);
  if (!tokenizer.ok()) return tokenizer.status();
  const Tokenizer& found = **tokenizer;
  if (found.vocabulary_hash() != identity.vocabulary_hash ||
      found.vocab_size() != identity.vocab_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        data_file_path, " was made with a ", TokenizerKindName(identity.kind),
        " vocabulary of ", identity.vocab_size, " tokens and hash ",
        absl::Hex(identity.vocabulary_hash, absl::kZeroPad16), ", but the one found has ",
        found.vocab_size(), " tokens and hash ",
        absl::Hex(found.vocabulary_hash(), absl::kZeroPad16)));
  }
  return tokenizer;
}

}  // namespace spotps
