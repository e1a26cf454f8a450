#include "trainer/data/sentencepiece_tokenizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "trainer/data/fnv1a.h"
#include "trainer/data/sentencepiece_plugin_loader.h"
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
  std::vector<std::string_view> sentences;
  for (absl::string_view text : texts) {
    if (absl::Status status = CheckUtf8(text, "SentencePiece training text"); !status.ok()) {
      return status;
    }
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      sentences.emplace_back(line.data(), line.size());
    }
  }
  absl::StatusOr<const sentencepiece_plugin::Plugin*> plugin = LoadSentencePiecePlugin();
  if (!plugin.ok()) return plugin.status();
  sentencepiece_plugin::TrainingOptions options;
  options.vocab_size = vocab_size;
  options.model_type = type == SentencePieceModelType::kBpe ? "bpe" : "unigram";
  std::string model;
  if (std::string error = (*plugin)->train(sentences, options, &model); !error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("training a SentencePiece ", options.model_type, " model of ", vocab_size,
                     " pieces on ", sentences.size(), " lines failed: ", error));
  }
  return FromModel(std::move(model), "the trained SentencePiece model");
}

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::FromModel(
    std::string serialized_model, absl::string_view where) {
  absl::StatusOr<const sentencepiece_plugin::Plugin*> plugin = LoadSentencePiecePlugin();
  if (!plugin.ok()) return plugin.status();
  std::unique_ptr<SentencePieceTokenizer> tokenizer(
      new SentencePieceTokenizer((*plugin)->new_processor()));
  if (std::string error = tokenizer->processor_->Load(serialized_model); !error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": not a SentencePiece model: ", error));
  }
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

int64_t SentencePieceTokenizer::padding_id() const {
  for (int id : {processor_->pad_id(), processor_->eos_id()}) {
    if (id >= 0) return id;
  }
  return processor_->unk_id();
}

absl::Status SentencePieceTokenizer::Encode(absl::string_view text, std::vector<uint32_t>& ids) {
  if (absl::Status status = CheckUtf8(text); !status.ok()) return status;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const size_t line_bytes = newline == absl::string_view::npos ? text.size() : newline + 1;
    if (std::string error =
            processor_->Encode(std::string_view(text.data(), line_bytes), &line_ids_);
        !error.empty()) {
      return absl::InternalError(absl::StrCat("SentencePiece encode failed: ", error));
    }
    ids.insert(ids.end(), line_ids_.begin(), line_ids_.end());
    text.remove_prefix(line_bytes);
  }
  return absl::OkStatus();
}

// Runs of known ids decode together (pieces of one word join up); an id
// outside the vocabulary, which SentencePiece would refuse, becomes '?'.
std::string SentencePieceTokenizer::Decode(absl::Span<const int64_t> ids) const {
  std::string text;
  std::vector<int> run;
  std::string decoded;
  const auto flush = [&] {
    if (run.empty()) return;
    if (processor_->Decode(run, &decoded).empty()) text += decoded;
    run.clear();
  };
  for (int64_t id : ids) {
    if (id >= 0 && id < vocab_size()) {
      run.push_back(static_cast<int>(id));
    } else {
      flush();
      text.push_back('?');
    }
  }
  flush();
  return text;
}

}  // namespace spotps
