#include "trainer/data/tokenizer_identity.h"

#include "absl/strings/str_cat.h"

namespace spotps {
namespace {

constexpr uint32_t kMaxModelFileNameBytes = 255;

bool IsKnownKind(uint32_t kind) {
  return kind <= static_cast<uint32_t>(TokenizerKind::kSentencePiece);
}

}  // namespace

absl::string_view TokenizerKindName(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::kByte:
      return "byte";
    case TokenizerKind::kGpt2:
      return "gpt2";
    case TokenizerKind::kSentencePiece:
      return "sentencepiece";
    case TokenizerKind::kUnknown:
      break;
  }
  return "unknown";
}

void PutTokenizerIdentity(const TokenizerIdentity& identity, std::string* fields) {
  PutU32(fields, static_cast<uint32_t>(identity.kind));
  PutU32(fields, identity.vocab_size);
  PutU64(fields, identity.vocabulary_hash);
  PutU32(fields, static_cast<uint32_t>(identity.model_file.size()));
  fields->append(identity.model_file);
}

absl::Status CheckModelFileName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxModelFileNameBytes || name == "." || name == ".." ||
      name.find('/') != absl::string_view::npos || name.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model file name \"", name, "\" is not a plain file name of 1 to ",
        kMaxModelFileNameBytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status TakeTokenizerIdentity(FieldCursor& cursor, absl::string_view what,
                                   TokenizerIdentity* identity) {
  uint32_t kind = 0, name_bytes = 0;
  absl::string_view name;
  if (!cursor.U32(&kind) || !cursor.U32(&identity->vocab_size) ||
      !cursor.U64(&identity->vocabulary_hash) || !cursor.U32(&name_bytes) ||
      !cursor.Bytes(name_bytes, &name)) {
    return absl::DataLossError(absl::StrCat(what, " header is cut short in its tokenizer fields"));
  }
  if (!IsKnownKind(kind)) {
    return absl::DataLossError(absl::StrCat(what, " names unknown tokenizer kind ", kind));
  }
  identity->kind = static_cast<TokenizerKind>(kind);
  if (identity->vocab_size == 0) {
    return absl::DataLossError(absl::StrCat(what, " header has a vocabulary of 0 tokens"));
  }
  identity->model_file = std::string(name);
  const bool needs_model = identity->kind == TokenizerKind::kSentencePiece;
  if (needs_model != !name.empty()) {
    return absl::DataLossError(absl::StrCat(what, ": a ", TokenizerKindName(identity->kind),
                                            " tokenizer ", needs_model ? "needs" : "has no",
                                            " model file, but the header names \"", name, "\""));
  }
  if (needs_model) {
    if (absl::Status status = CheckModelFileName(name); !status.ok()) {
      return absl::DataLossError(absl::StrCat(what, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace spotps
