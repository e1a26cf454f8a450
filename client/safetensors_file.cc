#include "client/safetensors_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "common/little_endian.h"
#include "common/tensor_codec.h"
#include "nlohmann/json.hpp"

namespace spotps {
namespace {

using Json = nlohmann::json;

constexpr absl::string_view kMetadataKey = "__metadata__";
constexpr size_t kLengthBytes = 8;

size_t BytesPerElement(SafetensorsDType dtype) { return dtype == SafetensorsDType::kF32 ? 4 : 2; }

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("safetensors: ", what));
}

float HalfToFloat(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(float(mantissa), -24);  // Subnormal (or zero).
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(float(mantissa | 0x400), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

void Widen(SafetensorsDType dtype, const char* src, int64_t n, float* dst) {
  if (n == 0) return;  // dst may be null: an empty vector.
  if (dtype == SafetensorsDType::kF32) {
    std::memcpy(dst, src, size_t(n) * 4);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = dtype == SafetensorsDType::kBF16 ? Bf16ToFloat(h) : HalfToFloat(h);
  }
}

// Element count of a shape, or an error for a negative or overflowing one.
absl::StatusOr<uint64_t> ElementCount(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return Malformed("negative dimension");
    if (__builtin_mul_overflow(n, uint64_t(d), &n) || n > (uint64_t{1} << 40)) {
      return Malformed("shape has too many elements");
    }
  }
  return n;
}

// The header's entry for one tensor, checked field by field.
struct HeaderEntry {
  std::string name;
  SafetensorsDType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

absl::StatusOr<HeaderEntry> ParseEntry(const std::string& name, const Json& entry,
                                       uint64_t data_bytes) {
  auto bad = [&](absl::string_view what) {
    return Malformed(absl::StrCat("tensor '", name, "': ", what));
  };
  if (name.empty()) return Malformed("a tensor has an empty name");
  if (!entry.is_object()) return bad("entry is not an object");
  for (const auto& field : entry.items()) {
    if (field.key() != "dtype" && field.key() != "shape" && field.key() != "data_offsets") {
      return bad(absl::StrCat("unknown field '", field.key(), "'"));
    }
  }
  HeaderEntry out;
  out.name = name;
  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) return bad("no string dtype");
  absl::StatusOr<SafetensorsDType> parsed = ParseSafetensorsDType(dtype->get<std::string>());
  if (!parsed.ok()) return bad(parsed.status().message());
  out.dtype = *parsed;
  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array() || shape->size() > 8) {
    return bad("shape is not a list of at most 8 dimensions");
  }
  for (const Json& d : *shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40)) {
      return bad("shape holds something other than a non-negative integer");
    }
    out.shape.push_back(int64_t(d.get<uint64_t>()));
  }
  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return bad("data_offsets is not [begin, end] of non-negative integers");
  }
  out.begin = (*offsets)[0].get<uint64_t>();
  out.end = (*offsets)[1].get<uint64_t>();
  if (out.begin > out.end || out.end > data_bytes) {
    return bad(absl::StrFormat("data_offsets [%d, %d] outside the data section of %d bytes",
                               out.begin, out.end, data_bytes));
  }
  absl::StatusOr<uint64_t> elements = ElementCount(out.shape);
  if (!elements.ok()) return bad(elements.status().message());
  const uint64_t want = *elements * BytesPerElement(out.dtype);
  if (out.end - out.begin != want) {
    return bad(absl::StrFormat("holds %d bytes but shape and %s need %d", out.end - out.begin,
                               SafetensorsDTypeName(out.dtype), want));
  }
  return out;
}

// Parses the JSON header, refusing a name that appears twice (the JSON
// library alone would keep the last one silently).
absl::StatusOr<Json> ParseHeaderJson(absl::string_view header) {
  std::set<std::string> names;
  std::string duplicate;
  Json::parser_callback_t note_names = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth == 1 && event == Json::parse_event_t::key && parsed.is_string()) {
      if (!names.insert(parsed.get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  Json json = Json::parse(header.begin(), header.end(), note_names, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Malformed("header is not valid JSON");
  if (!json.is_object()) return Malformed("header is not a JSON object");
  if (!duplicate.empty()) return Malformed(absl::StrCat("tensor '", duplicate, "' appears twice"));
  return json;
}

absl::Status ParseMetadata(const Json& metadata, std::map<std::string, std::string>* out) {
  if (!metadata.is_object()) return Malformed("__metadata__ is not an object");
  for (const auto& item : metadata.items()) {
    if (!item.value().is_string()) {
      return Malformed(absl::StrCat("__metadata__ '", item.key(), "' is not a string"));
    }
    (*out)[item.key()] = item.value().get<std::string>();
  }
  return absl::OkStatus();
}

// Every data byte belongs to exactly one tensor.
absl::Status CheckCoverage(std::vector<HeaderEntry>& entries, uint64_t data_bytes) {
  std::sort(entries.begin(), entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t covered = 0;
  const HeaderEntry* previous = nullptr;
  for (const HeaderEntry& e : entries) {
    if (e.begin < covered) {
      return Malformed(
          absl::StrFormat("tensors '%s' and '%s' overlap (bytes [%d, %d) and [%d, %d))",
                          previous->name, e.name, previous->begin, previous->end, e.begin, e.end));
    }
    if (e.begin > covered) {
      return Malformed(
          absl::StrFormat("bytes [%d, %d) of the data belong to no tensor", covered, e.begin));
    }
    covered = e.end;
    previous = &e;
  }
  if (covered != data_bytes) {
    return Malformed(absl::StrFormat("the tensors end at byte %d but the data section has %d bytes",
                                     covered, data_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view SafetensorsDTypeName(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::kF32:
      return "F32";
    case SafetensorsDType::kBF16:
      return "BF16";
    case SafetensorsDType::kF16:
      return "F16";
  }
  return "?";
}

absl::StatusOr<SafetensorsDType> ParseSafetensorsDType(absl::string_view name) {
  if (name == "F32") return SafetensorsDType::kF32;
  if (name == "BF16") return SafetensorsDType::kBF16;
  if (name == "F16") return SafetensorsDType::kF16;
  return absl::InvalidArgumentError(
      absl::StrCat("dtype '", name, "' is not one spotps reads (F32, BF16, F16)"));
}

const SafetensorsTensor* SafetensorsContents::Find(absl::string_view name) const {
  for (const SafetensorsTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::StatusOr<SafetensorsContents> ParseSafetensors(absl::string_view bytes) {
  if (bytes.size() < kLengthBytes) {
    return Malformed(
        absl::StrFormat("truncated: %d bytes, not even the 8-byte header length", bytes.size()));
  }
  const uint64_t header_bytes = DecodeU64(bytes.data());
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return Malformed(absl::StrFormat("header length %d exceeds the limit of %d bytes", header_bytes,
                                     kMaxSafetensorsHeaderBytes));
  }
  if (header_bytes > bytes.size() - kLengthBytes) {
    return Malformed(absl::StrFormat("truncated: header length %d but only %d bytes follow",
                                     header_bytes, bytes.size() - kLengthBytes));
  }
  absl::StatusOr<Json> header = ParseHeaderJson(bytes.substr(kLengthBytes, header_bytes));
  if (!header.ok()) return header.status();
  const absl::string_view data = bytes.substr(kLengthBytes + header_bytes);

  SafetensorsContents contents;
  std::vector<HeaderEntry> entries;
  for (const auto& item : header->items()) {
    if (item.key() == kMetadataKey) {
      if (absl::Status s = ParseMetadata(item.value(), &contents.metadata); !s.ok()) return s;
      continue;
    }
    absl::StatusOr<HeaderEntry> entry = ParseEntry(item.key(), item.value(), data.size());
    if (!entry.ok()) return entry.status();
    entries.push_back(*std::move(entry));
  }
  if (absl::Status s = CheckCoverage(entries, data.size()); !s.ok()) return s;

  contents.tensors.reserve(entries.size());
  for (HeaderEntry& e : entries) {
    SafetensorsTensor t;
    t.name = std::move(e.name);
    t.shape = std::move(e.shape);
    t.file_dtype = e.dtype;
    t.values.resize((e.end - e.begin) / BytesPerElement(e.dtype));
    Widen(e.dtype, data.data() + e.begin, int64_t(t.values.size()), t.values.data());
    contents.tensors.push_back(std::move(t));
  }
  return contents;
}

absl::StatusOr<SafetensorsContents> ReadSafetensorsFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<SafetensorsContents> contents = ParseSafetensors(*bytes);
  if (!contents.ok()) {
    return absl::Status(contents.status().code(),
                        absl::StrCat(path, ": ", contents.status().message()));
  }
  return contents;
}

absl::StatusOr<std::string> SerializeSafetensors(const SafetensorsContents& contents,
                                                 SafetensorsDType dtype) {
  if (dtype == SafetensorsDType::kF16) return Malformed("spotps does not write F16");
  Json header = Json::object();
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const SafetensorsTensor& t : contents.tensors) {
    if (t.name.empty() || t.name == kMetadataKey || !names.insert(t.name).second) {
      return Malformed(absl::StrCat("tensor name '", t.name, "' is empty, reserved or repeated"));
    }
    absl::StatusOr<uint64_t> elements = ElementCount(t.shape);
    if (!elements.ok()) return elements.status();
    if (*elements != t.values.size()) {
      return Malformed(absl::StrFormat("tensor '%s': shape has %d elements but it holds %d", t.name,
                                       *elements, t.values.size()));
    }
    const uint64_t end = offset + *elements * BytesPerElement(dtype);
    header[t.name] = {{"dtype", std::string(SafetensorsDTypeName(dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, end}}};
    offset = end;
  }
  if (!contents.metadata.empty()) header[std::string(kMetadataKey)] = contents.metadata;
  std::string text = header.dump();
  // Pads the header with spaces so the data starts 8-byte aligned, as the
  // reference writer does (readers may then map it in place).
  text.append((8 - (kLengthBytes + text.size()) % 8) % 8, ' ');

  std::string out(kLengthBytes, '\0');
  EncodeU64(out.data(), text.size());
  out.reserve(kLengthBytes + text.size() + offset);
  out += text;
  const v1::DType wire = dtype == SafetensorsDType::kF32 ? v1::DTYPE_FP32 : v1::DTYPE_BF16;
  for (const SafetensorsTensor& t : contents.tensors) {
    if (t.values.empty()) continue;
    AppendEncoded(t.values.data(), int64_t(t.values.size()), wire, &out);
  }
  return out;
}

absl::Status WriteSafetensorsFile(const std::string& path, const SafetensorsContents& contents,
                                  SafetensorsDType dtype) {
  absl::StatusOr<std::string> bytes = SerializeSafetensors(contents, dtype);
  if (!bytes.ok()) return bytes.status();
  return WriteFileAtomically(path, *bytes);
}

}  // namespace spotps
