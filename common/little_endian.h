// Fixed-width little-endian integers in byte strings: the integer fields of
// spotps' file formats, whatever the host's byte order.
#ifndef SPOTPS_COMMON_LITTLE_ENDIAN_H_
#define SPOTPS_COMMON_LITTLE_ENDIAN_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace spotps {

inline void EncodeU32(char* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<char>(v >> (8 * i));
}
inline void EncodeU64(char* dst, uint64_t v) {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<char>(v >> (8 * i));
}
inline uint32_t DecodeU32(const char* src) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(src[i]);
  return v;
}
inline uint64_t DecodeU64(const char* src) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(src[i]);
  return v;
}

// Appends the field to `out`.
inline void PutU32(std::string* out, uint32_t v) {
  char buf[4];
  EncodeU32(buf, v);
  out->append(buf, sizeof(buf));
}
inline void PutU64(std::string* out, uint64_t v) {
  char buf[8];
  EncodeU64(buf, v);
  out->append(buf, sizeof(buf));
}

// Takes fields front to back from a byte string. Each call returns false,
// taking nothing, if the field would run past the end.
class FieldCursor {
 public:
  explicit FieldCursor(absl::string_view bytes) : rest_(bytes) {}

  bool U32(uint32_t* v) {
    absl::string_view field;
    if (!Bytes(4, &field)) return false;
    *v = DecodeU32(field.data());
    return true;
  }
  bool U64(uint64_t* v) {
    absl::string_view field;
    if (!Bytes(8, &field)) return false;
    *v = DecodeU64(field.data());
    return true;
  }
  bool Bytes(uint64_t n, absl::string_view* v) {
    if (n > rest_.size()) return false;
    *v = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return true;
  }
  bool empty() const { return rest_.empty(); }

 private:
  absl::string_view rest_;
};

}  // namespace spotps

#endif  // SPOTPS_COMMON_LITTLE_ENDIAN_H_
