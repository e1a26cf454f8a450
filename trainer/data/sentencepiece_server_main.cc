// spotps-sentencepiece: SentencePiece in a process of its own, for spotps'
// binaries. Debian's libsentencepiece exports a bundled protobuf-lite 3.14
// that collides with LibTorch's libprotobuf 3.21 in one process (it
// crashes at load), so only this small program links it.
//
// Started by sentencepiece_helper.cc with a stream socket as descriptor 3;
// answers the requests of sentencepiece_protocol.h until the other end
// closes. Standard output goes to standard error, so that nothing the
// library prints can reach the socket. Not meant to be run by hand.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/data/sentencepiece_engine.h"
#include "trainer/data/sentencepiece_protocol.h"

namespace spotps {
namespace {

using sentencepiece_protocol::Message;
using sentencepiece_protocol::MessageType;
using sentencepiece_protocol::PayloadReader;
using sentencepiece_protocol::PutU32;

constexpr int kSocket = 3;

class Server {
 public:
  // Fills *reply, or returns the error.
  std::string Handle(const Message& request, std::string* reply);

 private:
  std::string Train(PayloadReader payload, std::string* reply);
  std::string Load(std::string_view model, std::string* reply);
  std::string Encode(PayloadReader payload, std::string* reply);
  std::string Decode(PayloadReader payload, std::string* reply);
  // The model `payload` starts with, or null with *error set.
  const sentencepiece_engine::Processor* TakeModel(PayloadReader& payload, std::string* error);

  std::map<uint32_t, std::unique_ptr<sentencepiece_engine::Processor>> models_;
  uint32_t next_handle_ = 1;
};

std::string Server::Handle(const Message& request, std::string* reply) {
  PayloadReader payload(request.payload);
  switch (request.type) {
    case MessageType::kTrain:
      return Train(payload, reply);
    case MessageType::kLoad:
      return Load(request.payload, reply);
    case MessageType::kEncode:
      return Encode(payload, reply);
    case MessageType::kDecode:
      return Decode(payload, reply);
    case MessageType::kRelease: {
      uint32_t handle = 0;
      if (!payload.U32(&handle)) return "a release request without a handle";
      models_.erase(handle);
      return "";
    }
    default:
      return "unknown request " + std::to_string(static_cast<uint32_t>(request.type));
  }
}

std::string Server::Train(PayloadReader payload, std::string* reply) {
  sentencepiece_engine::TrainingOptions options;
  uint32_t vocab_size = 0, count = 0;
  std::string_view model_type;
  if (!payload.U32(&vocab_size) || !payload.String(&model_type) || !payload.U32(&count)) {
    return "a malformed training request";
  }
  options.vocab_size = static_cast<int>(vocab_size);
  options.model_type = std::string(model_type);
  std::vector<std::string_view> sentences(count);
  for (std::string_view& sentence : sentences) {
    if (!payload.String(&sentence)) return "a training request cut short";
  }
  return sentencepiece_engine::Train(sentences, options, reply);
}

std::string Server::Load(std::string_view model, std::string* reply) {
  std::unique_ptr<sentencepiece_engine::Processor> processor = sentencepiece_engine::NewProcessor();
  if (std::string error = processor->Load(model); !error.empty()) return error;
  const uint32_t handle = next_handle_++;
  PutU32(reply, handle);
  for (int value : {processor->vocab_size(), processor->pad_id(), processor->eos_id(),
                    processor->unk_id()}) {
    PutU32(reply, static_cast<uint32_t>(value));
  }
  models_[handle] = std::move(processor);
  return "";
}

const sentencepiece_engine::Processor* Server::TakeModel(PayloadReader& payload,
                                                         std::string* error) {
  uint32_t handle = 0;
  if (!payload.U32(&handle)) {
    *error = "a request without a model handle";
    return nullptr;
  }
  const auto model = models_.find(handle);
  if (model == models_.end()) {
    *error = "no model " + std::to_string(handle);
    return nullptr;
  }
  return model->second.get();
}

// Line by line, each line with its newline, as the models are trained.
std::string Server::Encode(PayloadReader payload, std::string* reply) {
  std::string error;
  const sentencepiece_engine::Processor* model = TakeModel(payload, &error);
  if (model == nullptr) return error;
  std::string_view text = payload.rest();
  std::vector<int> ids;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const size_t line_bytes = newline == std::string_view::npos ? text.size() : newline + 1;
    if (std::string failed = model->Encode(text.substr(0, line_bytes), &ids); !failed.empty()) {
      return failed;
    }
    for (int id : ids) PutU32(reply, static_cast<uint32_t>(id));
    text.remove_prefix(line_bytes);
  }
  return "";
}

std::string Server::Decode(PayloadReader payload, std::string* reply) {
  std::string error;
  const sentencepiece_engine::Processor* model = TakeModel(payload, &error);
  if (model == nullptr) return error;
  std::vector<int> ids;
  uint32_t id = 0;
  while (payload.U32(&id)) ids.push_back(static_cast<int>(id));
  return model->Decode(ids, reply);
}

}  // namespace
}  // namespace spotps

int main() {
  using spotps::sentencepiece_protocol::MessageType;
  struct stat socket_status;
  if (fstat(spotps::kSocket, &socket_status) != 0 || !S_ISSOCK(socket_status.st_mode)) {
    std::fprintf(stderr,
                 "spotps-sentencepiece runs SentencePiece for spotps-tokenize and the other "
                 "spotps binaries, which start it; it is not run by hand.\n");
    return 2;  // Bad usage, as common/exit_status.h.
  }
  if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return 1;
  spotps::Server server;
  spotps::sentencepiece_protocol::Message request;
  while (spotps::sentencepiece_protocol::ReadMessage(spotps::kSocket, &request)) {
    std::string reply;
    const std::string error = server.Handle(request, &reply);
    const bool ok = error.empty();
    if (!spotps::sentencepiece_protocol::WriteMessage(
            spotps::kSocket, ok ? MessageType::kOk : MessageType::kError, ok ? reply : error)) {
      return 1;
    }
  }
  return 0;
}
