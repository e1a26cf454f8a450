// SentencePiece (libsentencepiece 0.1.97, run in the helper process of
// sentencepiece_helper.h) as a Tokenizer: models trained on the user's own
// text, or loaded from a model file. Trained models decode to exactly the
// text encoded (no normalization, byte fallback).

#ifndef SPOTPS_TRAINER_DATA_SENTENCEPIECE_TOKENIZER_H_
#define SPOTPS_TRAINER_DATA_SENTENCEPIECE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trainer/data/sentencepiece_helper.h"
#include "trainer/data/tokenizer.h"

namespace spotps {

enum class SentencePieceModelType { kBpe, kUnigram };

// "bpe" or "unigram"; InvalidArgument for anything else.
absl::StatusOr<SentencePieceModelType> ParseSentencePieceModelType(absl::string_view name);

// Owns one loaded model and its serialized bytes (which saving it beside a
// data file writes, and whose hash identifies the vocabulary).
class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Trains a `vocab_size` model on `texts`, one sentence per line.
  // InvalidArgument with SentencePiece's reason when it cannot (e.g. a
  // vocabulary larger than the text supports).
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Train(
      absl::Span<const absl::string_view> texts, int vocab_size, SentencePieceModelType type);
  // Loads a serialized model; `where` names it in errors. All three fail
  // with FailedPrecondition if the helper cannot be started.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> FromModel(
      std::string serialized_model, absl::string_view where);
  // Loads the model file at `path`.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(const std::string& path);

  ~SentencePieceTokenizer() override;

  const std::string& serialized_model() const { return serialized_model_; }

  TokenizerKind kind() const override { return TokenizerKind::kSentencePiece; }
  int64_t vocab_size() const override { return model_.vocab_size; }
  uint64_t vocabulary_hash() const override { return vocabulary_hash_; }
  int64_t padding_id() const override;
  // Encodes line by line (each line with its newline), as models train.
  absl::Status Encode(absl::string_view text, std::vector<uint32_t>& ids) override;
  std::string Decode(absl::Span<const int64_t> ids) const override;

 private:
  SentencePieceTokenizer(SentencePieceHelper* helper, SentencePieceHelper::LoadedModel model)
      : helper_(helper), model_(model) {}

  SentencePieceHelper* const helper_;
  const SentencePieceHelper::LoadedModel model_;
  std::string serialized_model_;
  uint64_t vocabulary_hash_ = 0;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_SENTENCEPIECE_TOKENIZER_H_
