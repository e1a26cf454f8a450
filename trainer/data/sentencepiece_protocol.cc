#include "trainer/data/sentencepiece_protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace spotps {
namespace sentencepiece_protocol {
namespace {

constexpr size_t kPrefixBytes = 12;

bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t sent = send(fd, data, size, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    data += sent;
    size -= static_cast<size_t>(sent);
  }
  return true;
}

bool ReceiveAll(int fd, char* data, size_t size) {
  while (size > 0) {
    const ssize_t received = read(fd, data, size);
    if (received < 0 && errno == EINTR) continue;
    if (received <= 0) return false;
    data += received;
    size -= static_cast<size_t>(received);
  }
  return true;
}

uint64_t DecodeLittleEndian(const char* p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

void PutLittleEndian(std::string* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

}  // namespace

bool WriteMessage(int fd, MessageType type, std::string_view payload) {
  std::string prefix;
  PutLittleEndian(&prefix, static_cast<uint32_t>(type), 4);
  PutLittleEndian(&prefix, payload.size(), 8);
  return SendAll(fd, prefix.data(), prefix.size()) && SendAll(fd, payload.data(), payload.size());
}

bool ReadMessage(int fd, Message* message) {
  char prefix[kPrefixBytes];
  if (!ReceiveAll(fd, prefix, sizeof(prefix))) return false;
  const uint64_t length = DecodeLittleEndian(prefix + 4, 8);
  if (length > kMaxMessageBytes) return false;
  message->type = static_cast<MessageType>(DecodeLittleEndian(prefix, 4));
  message->payload.resize(length);
  return ReceiveAll(fd, message->payload.data(), length);
}

void PutU32(std::string* out, uint32_t value) { PutLittleEndian(out, value, 4); }

void PutString(std::string* out, std::string_view value) {
  PutU32(out, static_cast<uint32_t>(value.size()));
  out->append(value.data(), value.size());
}

bool PayloadReader::U32(uint32_t* value) {
  if (rest_.size() < 4) return false;
  *value = static_cast<uint32_t>(DecodeLittleEndian(rest_.data(), 4));
  rest_.remove_prefix(4);
  return true;
}

bool PayloadReader::String(std::string_view* value) {
  std::string_view saved = rest_;
  uint32_t length = 0;
  if (!U32(&length) || rest_.size() < length) {
    rest_ = saved;
    return false;
  }
  *value = rest_.substr(0, length);
  rest_.remove_prefix(length);
  return true;
}

}  // namespace sentencepiece_protocol
}  // namespace spotps
