// safetensors: the tensor file format of Hugging Face and most of the
// PyTorch world, read and written with every field checked.
//
// Layout (little-endian): u64 header length N, N bytes of JSON
//   {"<name>": {"dtype": "F32"|"BF16"|"F16", "shape": [...],
//               "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"<key>": "<string>", ...}}
// then the data: every tensor's bytes, row-major, at [begin, end) of the
// data section. A file is refused unless its tensors cover the data section
// exactly once (no gap, no overlap, nothing after), each byte range matches
// its shape and dtype, and the header is at most kMaxHeaderBytes.
#ifndef SPOTPS_CLIENT_SAFETENSORS_FILE_H_
#define SPOTPS_CLIENT_SAFETENSORS_FILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

// The element types spotps reads; it writes F32 and BF16.
enum class SafetensorsDType { kF32, kBF16, kF16 };

absl::string_view SafetensorsDTypeName(SafetensorsDType dtype);
// INVALID_ARGUMENT for a name other than F32, BF16, F16.
absl::StatusOr<SafetensorsDType> ParseSafetensorsDType(absl::string_view name);

// One tensor, held as FP32 whatever its dtype in the file (BF16 and F16
// widen exactly).
struct SafetensorsTensor {
  std::string name;
  std::vector<int64_t> shape;
  SafetensorsDType file_dtype = SafetensorsDType::kF32;
  std::vector<float> values;  // Row-major, product(shape) elements.
};

// Owns the tensors of one file, in data order, and its string metadata.
struct SafetensorsContents {
  std::vector<SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata;

  // Returns the tensor with this name, or nullptr.
  const SafetensorsTensor* Find(absl::string_view name) const;
};

// Header bytes accepted (the reference implementation's limit too).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;

// Parses a whole file's bytes. INVALID_ARGUMENT naming the tensor and the
// field for anything malformed: truncated, header length beyond the file or
// the cap, JSON that does not parse or is not an object of objects, unknown
// dtype, a shape that is not a list of non-negative integers, offsets out of
// the data section, overlapping or leaving gaps, a byte length that differs
// from shape x dtype size, a duplicate name, metadata that is not strings.
absl::StatusOr<SafetensorsContents> ParseSafetensors(absl::string_view bytes);
// ReadFile + ParseSafetensors; errors name the path.
absl::StatusOr<SafetensorsContents> ReadSafetensorsFile(const std::string& path);

// Encodes every tensor as `dtype` (F32 or BF16, round to nearest even), laid
// out in the order given. INVALID_ARGUMENT for a shape that does not match
// its values, a duplicate or empty name, or F16.
absl::StatusOr<std::string> SerializeSafetensors(const SafetensorsContents& contents,
                                                 SafetensorsDType dtype);
// SerializeSafetensors written atomically (temporary file, fsync, rename).
absl::Status WriteSafetensorsFile(const std::string& path, const SafetensorsContents& contents,
                                  SafetensorsDType dtype);

}  // namespace spotps

#endif  // SPOTPS_CLIENT_SAFETENSORS_FILE_H_
