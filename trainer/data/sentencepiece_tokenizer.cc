#include "trainer/data/sentencepiece_tokenizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "trainer/data/fnv1a.h"
#include "trainer/data/utf8.h"

namespace spotps {

absl::StatusOr<SentencePieceModelType> ParseSentencePieceModelType(absl::string_view name) {
  if (name == "bpe") return SentencePieceModelType::kBpe;
  if (name == "unigram") return SentencePieceModelType::kUnigram;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown SentencePiece model type \"", name, "\" (expected bpe or unigram)"));
}

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Train(
    absl::Span<const absl::string_view> texts, int vocab_size, SentencePieceModelType type) {
  std::vector<absl::string_view> sentences;
  for (absl::string_view text : texts) {
    if (absl::Status status = CheckUtf8(text, "SentencePiece training text"); !status.ok()) {
      return status;
    }
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      sentences.push_back(line);
    }
  }
  absl::StatusOr<SentencePieceHelper*> helper = SentencePieceHelper::Get();
  if (!helper.ok()) return helper.status();
  const absl::string_view model_type = type == SentencePieceModelType::kBpe ? "bpe" : "unigram";
  absl::StatusOr<std::string> model = (*helper)->Train(sentences, vocab_size, model_type);
  if (!model.ok()) {
    return absl::Status(model.status().code(),
                        absl::StrCat("training a SentencePiece ", model_type, " model of ",
                                     vocab_size, " pieces on ", sentences.size(),
                                     " lines failed: ", model.status().message()));
  }
  return FromModel(*std::move(model), "the trained SentencePiece model");
}

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::FromModel(
    std::string serialized_model, absl::string_view where) {
  absl::StatusOr<SentencePieceHelper*> helper = SentencePieceHelper::Get();
  if (!helper.ok()) return helper.status();
  absl::StatusOr<SentencePieceHelper::LoadedModel> model = (*helper)->Load(serialized_model);
  if (!model.ok()) {
    return absl::Status(model.status().code(), absl::StrCat(where, ": not a SentencePiece model: ",
                                                            model.status().message()));
  }
  std::unique_ptr<SentencePieceTokenizer> tokenizer(new SentencePieceTokenizer(*helper, *model));
  tokenizer->vocabulary_hash_ = Fnv1a64(serialized_model);
  tokenizer->serialized_model_ = std::move(serialized_model);
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Load(
    const std::string& path) {
  absl::StatusOr<std::string> model = ReadFile(path);
  if (!model.ok()) return model.status();
  return FromModel(*std::move(model), path);
}

SentencePieceTokenizer::~SentencePieceTokenizer() { helper_->Release(model_.handle); }

int64_t SentencePieceTokenizer::padding_id() const {
  for (int id : {model_.pad_id, model_.eos_id}) {
    if (id >= 0) return id;
  }
  return model_.unk_id;
}

absl::Status SentencePieceTokenizer::Encode(absl::string_view text, std::vector<uint32_t>& ids) {
  if (absl::Status status = CheckUtf8(text); !status.ok()) return status;
  return helper_->Encode(model_.handle, text, ids);
}

// Runs of known ids decode together (pieces of one word join up); an id
// outside the vocabulary, which SentencePiece would refuse, becomes '?'.
std::string SentencePieceTokenizer::Decode(absl::Span<const int64_t> ids) const {
  std::string text;
  std::vector<int64_t> run;
  const auto flush = [&] {
    if (run.empty()) return;
    if (absl::StatusOr<std::string> decoded = helper_->Decode(model_.handle, run); decoded.ok()) {
      text += *decoded;
    }
    run.clear();
  };
  for (int64_t id : ids) {
    if (id >= 0 && id < vocab_size()) {
      run.push_back(id);
    } else {
      flush();
      text.push_back('?');
    }
  }
  flush();
  return text;
}

}  // namespace spotps
