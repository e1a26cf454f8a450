// Includes libsentencepiece's headers and nothing from Abseil (see the
// header).
#include "trainer/data/sentencepiece_engine.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unordered_map>

namespace sentencepiece {
namespace logging {
void SetMinLogLevel(int level);  // Exported by libsentencepiece, not declared in its headers.
}  // namespace logging
}  // namespace sentencepiece

namespace spotps {
namespace sentencepiece_engine {
namespace {

constexpr int kLogWarningsAndWorse = 1;

// Feeds the trainer from memory instead of a file.
class Sentences final : public sentencepiece::SentenceIterator {
 public:
  explicit Sentences(const std::vector<std::string_view>& sentences) : sentences_(sentences) {}
  bool done() const override { return next_ >= sentences_.size(); }
  void Next() override { ++next_; }
  const std::string& value() const override {
    value_.assign(sentences_[next_].data(), sentences_[next_].size());
    return value_;
  }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string_view>& sentences_;
  size_t next_ = 0;
  mutable std::string value_;
};

std::string ErrorOf(const sentencepiece::util::Status& status) {
  if (status.ok()) return "";
  std::string message = status.ToString();
  return message.empty() ? "sentencepiece failed" : message;
}

}  // namespace

std::string Train(const std::vector<std::string_view>& sentences, const TrainingOptions& options,
                  std::string* model) {
  const std::unordered_map<std::string, std::string> settings = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      // Decoding must give back exactly the bytes encoded.
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      {"max_sentence_length", "65536"},
      // One thread: the same text always trains the same model.
      {"num_threads", "1"},
  };
  sentencepiece::logging::SetMinLogLevel(kLogWarningsAndWorse);  // Not its progress lines.
  Sentences iterator(sentences);
  return ErrorOf(sentencepiece::SentencePieceTrainer::Train(settings, &iterator, model));
}

namespace {

class SentencePieceProcessor final : public Processor {
 public:
  std::string Load(std::string_view serialized_model) override {
    return ErrorOf(processor_.LoadFromSerializedProto(serialized_model));
  }
  int vocab_size() const override { return processor_.GetPieceSize(); }
  int pad_id() const override { return processor_.pad_id(); }
  int eos_id() const override { return processor_.eos_id(); }
  int unk_id() const override { return processor_.unk_id(); }
  std::string Encode(std::string_view text, std::vector<int>* ids) const override {
    return ErrorOf(processor_.Encode(text, ids));
  }
  std::string Decode(const std::vector<int>& ids, std::string* text) const override {
    return ErrorOf(processor_.Decode(ids, text));
  }

 private:
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace

std::unique_ptr<Processor> NewProcessor() { return std::make_unique<SentencePieceProcessor>(); }

}  // namespace sentencepiece_engine
}  // namespace spotps
