// The interface between spotps and its SentencePiece plug-in,
// libspotps_sentencepiece.so (sentencepiece_plugin.cc), which alone links
// libsentencepiece. Standard C++ only: the plug-in's side includes
// SentencePiece's header, which declares absl::string_view as
// std::string_view and so cannot meet Abseil's. Errors are strings, empty
// for none.
//
// Why a plug-in: Debian's libsentencepiece exports its own copy of
// protobuf-lite, whose symbols would take the place of LibTorch's
// libprotobuf in a process that linked both (it crashes while loading).
// sentencepiece_plugin_loader.h loads the plug-in so that its symbols stay
// its own.

#ifndef SPOTPS_TRAINER_DATA_SENTENCEPIECE_PLUGIN_H_
#define SPOTPS_TRAINER_DATA_SENTENCEPIECE_PLUGIN_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spotps {
namespace sentencepiece_plugin {

struct TrainingOptions {
  int vocab_size = 0;
  std::string model_type;  // "bpe" or "unigram".
};

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

// What the plug-in offers, through the one symbol kEntryPoint names.
struct Plugin {
  // Trains a model on `sentences` (lines, without their newline) with
  // settings under which decoding gives the encoded text back exactly (no
  // normalization, no dummy prefix, whitespace kept, byte fallback), and
  // stores the serialized model in *model.
  std::string (*train)(const std::vector<std::string_view>& sentences,
                       const TrainingOptions& options, std::string* model);
  std::unique_ptr<Processor> (*new_processor)();
};

// extern "C" const Plugin* SpotpsSentencePiecePlugin();
inline constexpr char kEntryPoint[] = "SpotpsSentencePiecePlugin";
inline constexpr char kPluginFileName[] = "libspotps_sentencepiece.so";

}  // namespace sentencepiece_plugin
}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_SENTENCEPIECE_PLUGIN_H_
