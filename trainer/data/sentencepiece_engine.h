// SentencePiece itself, for the spotps-sentencepiece helper process
// (sentencepiece_server_main.cc), the one program that links
// libsentencepiece. Standard C++ only: SentencePiece's header declares
// absl::string_view as std::string_view, which cannot meet Abseil's, so
// this header and its .cc never include Abseil. Errors are strings, empty
// for none.

#ifndef SPOTPS_TRAINER_DATA_SENTENCEPIECE_ENGINE_H_
#define SPOTPS_TRAINER_DATA_SENTENCEPIECE_ENGINE_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spotps {
namespace sentencepiece_engine {

struct TrainingOptions {
  int vocab_size = 0;
  std::string model_type;  // "bpe" or "unigram".
};

// Trains a model on `sentences` (lines, without their newline) with
// settings under which decoding gives the encoded text back exactly (no
// normalization, no dummy prefix, whitespace kept, byte fallback), and
// stores the serialized model in *model.
std::string Train(const std::vector<std::string_view>& sentences, const TrainingOptions& options,
                  std::string* model);

// One loaded model.
class Processor {
 public:
  virtual ~Processor() = default;
  virtual std::string Load(std::string_view serialized_model) = 0;
  virtual int vocab_size() const = 0;
  virtual int pad_id() const = 0;
  virtual int eos_id() const = 0;
  virtual int unk_id() const = 0;
  virtual std::string Encode(std::string_view text, std::vector<int>* ids) const = 0;
  virtual std::string Decode(const std::vector<int>& ids, std::string* text) const = 0;
};

std::unique_ptr<Processor> NewProcessor();

}  // namespace sentencepiece_engine
}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_SENTENCEPIECE_ENGINE_H_
