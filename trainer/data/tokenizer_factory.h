// Every way to get a Tokenizer: from the --tokenizer flag's spec, or from
// what a data file records about the tokenizer that made it.

#ifndef SPOTPS_TRAINER_DATA_TOKENIZER_FACTORY_H_
#define SPOTPS_TRAINER_DATA_TOKENIZER_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "trainer/data/sentencepiece_tokenizer.h"
#include "trainer/data/tokenizer.h"

namespace spotps {

// A parsed --tokenizer value:
//   byte            one token per byte (the default)
//   gpt2            GPT-2's BPE, vocabulary from $SPOTPS_GPT2_DIR or the
//                   install directory (see FindGpt2VocabularyDir)
//   gpt2:DIR        GPT-2's BPE, vocabulary from DIR
//   sp:N            a SentencePiece model of N pieces trained on the input
//   sp_model:PATH   the SentencePiece model file at PATH
struct TokenizerSpec {
  enum class Source { kByte, kGpt2, kSentencePieceTraining, kSentencePieceModel };
  Source source = Source::kByte;
  std::string path;  // gpt2: the directory ("" looks it up); sp_model: the file.
  int sentencepiece_vocab_size = 0;  // sp:N.
};

// InvalidArgument, quoting the spec and the forms above, if it is none.
absl::StatusOr<TokenizerSpec> ParseTokenizerSpec(absl::string_view spec);

// The tokenizer `spec` names; for sp:N, trained on `training_texts` as a
// `model_type` model (the texts are not read for the other sources).
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(
    const TokenizerSpec& spec, absl::Span<const absl::string_view> training_texts,
    SentencePieceModelType model_type);

// Writes a SentencePiece tokenizer's model to "<data_file_path>.spm"
// atomically and returns its file name, for the data file's header; other
// kinds have no model file, and get "".
absl::StatusOr<std::string> SaveModelBeside(const Tokenizer& tokenizer,
                                            const std::string& data_file_path);

// The tokenizer a data file at `data_file_path` was made with, as its
// header's `identity` records: sentencepiece models are read from the
// file's directory, GPT-2's vocabulary is looked up as
// FindGpt2VocabularyDir() does. FailedPrecondition if the vocabulary found
// is not the file's (another hash) or the file names none (raw_u16).
absl::StatusOr<std::unique_ptr<Tokenizer>> OpenTokenizerOf(const TokenizerIdentity& identity,
                                                           const std::string& data_file_path);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_TOKENIZER_FACTORY_H_
