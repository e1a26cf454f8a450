// The messages between spotps and its SentencePiece helper process,
// spotps-sentencepiece (sentencepiece_server_main.cc), over a stream
// socket. Standard C++ only: the helper links libsentencepiece, which
// carries its own protobuf-lite and Abseil look-alikes, and nothing else.
//
// A message is type (uint32), payload length (uint64), payload; integers
// little-endian. Each request gets one reply, kOk or kError (the payload
// is the error's text):
//   kTrain    vocab_size u32, model_type str, count u32, count x sentence str
//             -> the serialized model
//   kLoad     the serialized model
//             -> handle u32, vocab_size u32, pad_id, eos_id, unk_id (int32)
//   kEncode   handle u32, then the text      -> the ids, uint32 each
//   kDecode   handle u32, then int32 ids     -> the text
//   kRelease  handle u32                     -> nothing
// where str is a uint32 length and that many bytes.

#ifndef SPOTPS_TRAINER_DATA_SENTENCEPIECE_PROTOCOL_H_
#define SPOTPS_TRAINER_DATA_SENTENCEPIECE_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace spotps {
namespace sentencepiece_protocol {

enum class MessageType : uint32_t {
  kTrain = 1,
  kLoad = 2,
  kEncode = 3,
  kDecode = 4,
  kRelease = 5,
  kOk = 100,
  kError = 101,
};

// A larger message is taken for a broken stream.
inline constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 34;

struct Message {
  MessageType type = MessageType::kError;
  std::string payload;
};

// Sends one whole message (never raising SIGPIPE); false on failure, with
// errno set.
bool WriteMessage(int fd, MessageType type, std::string_view payload);

// Receives one whole message; false at the end of the stream, on a read
// error or for a length past kMaxMessageBytes.
bool ReadMessage(int fd, Message* message);

void PutU32(std::string* out, uint32_t value);
void PutString(std::string* out, std::string_view value);

// Takes fields front to back from a payload; each returns false, taking
// nothing, if the field would run past its end.
class PayloadReader {
 public:
  explicit PayloadReader(std::string_view payload) : rest_(payload) {}
  bool U32(uint32_t* value);
  bool String(std::string_view* value);
  std::string_view rest() const { return rest_; }

 private:
  std::string_view rest_;
};

}  // namespace sentencepiece_protocol
}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_SENTENCEPIECE_PROTOCOL_H_
