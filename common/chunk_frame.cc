#include "common/chunk_frame.h"

#include <algorithm>
#include <cstring>

#include "common/tensor_codec.h"

namespace spotps {
namespace {

constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4,
                   kFixed32 = 5;
// Groups nest no deeper than protobuf's default recursion limit.
constexpr int kMaxGroupDepth = 100;
// PartitionChunk's fields.
constexpr uint32_t kChunkPartitionId = 1, kChunkOffset = 2, kChunkData = 3, kChunkVersion = 4;
constexpr uint64_t kMaxFieldNumber = (uint64_t{1} << 29) - 1;

constexpr uint64_t Tag(uint32_t field, uint32_t wire_type) {
  return (uint64_t{field} << 3) | wire_type;
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

char* PutVarint(uint64_t v, char* p) {
  for (; v >= 0x80; v >>= 7) *p++ = static_cast<char>(v | 0x80);
  *p++ = static_cast<char>(v);
  return p;
}

void AppendVarint(uint64_t v, std::string* out) {
  char buf[10];
  out->append(buf, PutVarint(v, buf) - buf);
}

size_t ChunkBodySize(const ChunkHeader& c) {
  return VarintSize(Tag(kChunkPartitionId, kVarint)) + VarintSize(c.partition_id) +
         VarintSize(Tag(kChunkOffset, kVarint)) + VarintSize(c.offset) +
         VarintSize(Tag(kChunkVersion, kVarint)) + VarintSize(c.version) +
         VarintSize(Tag(kChunkData, kLengthDelimited)) + VarintSize(c.payload_bytes) +
         c.payload_bytes;
}

using Pieces = absl::InlinedVector<absl::string_view, 2>;

// Reads a message spread over slices, byte by byte for tags and varints and
// piece by piece for payloads.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices) : slices_(slices) {
    for (const grpc::Slice& s : slices_) total_ += s.size();
    SkipEmpty();
  }

  size_t pos() const { return pos_; }
  size_t total() const { return total_; }

  bool Varint(uint64_t* v) {
    *v = 0;
    for (int i = 0; i < 10; ++i) {
      if (idx_ == slices_.size()) return false;
      const uint8_t b = slices_[idx_].begin()[off_];
      Advance(1);
      *v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) return true;
    }
    return false;  // More than 10 bytes: not a varint.
  }

  // A field tag: as protobuf reads them, at most 5 bytes, kept to 32 bits.
  bool Tag(uint64_t* tag) {
    *tag = 0;
    for (int i = 0; i < 5; ++i) {
      if (idx_ == slices_.size()) return false;
      const uint8_t b = slices_[idx_].begin()[off_];
      Advance(1);
      *tag |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) {
        *tag &= 0xffffffffu;
        return true;
      }
    }
    return false;
  }

  // Moves n bytes on, adding the bytes passed over to *pieces (if given).
  bool Take(size_t n, Pieces* pieces) {
    if (n > total_ - pos_) return false;
    while (n > 0) {
      const size_t k = std::min(n, slices_[idx_].size() - off_);
      if (pieces != nullptr) {
        pieces->emplace_back(reinterpret_cast<const char*>(slices_[idx_].begin()) + off_, k);
      }
      Advance(k);
      n -= k;
    }
    return true;
  }

 private:
  void Advance(size_t k) {
    off_ += k;
    pos_ += k;
    SkipEmpty();
  }
  void SkipEmpty() {
    while (idx_ < slices_.size() && off_ == slices_[idx_].size()) {
      ++idx_;
      off_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t idx_ = 0, off_ = 0, pos_ = 0, total_ = 0;
};

// Passes over the value of field `field` of wire type `wire_type` that must
// end by `end`; appends it in wire format to *out if given. Unknown fields
// may be groups (deprecated, but protobuf skips them too).
bool PassValue(SliceCursor& c, uint64_t field, uint32_t wire_type, size_t end, std::string* out,
               int depth = 0) {
  Pieces pieces;
  switch (wire_type) {
    case kVarint: {
      uint64_t v;
      if (!c.Varint(&v) || c.pos() > end) return false;
      if (out != nullptr) AppendVarint(v, out);
      return true;
    }
    case kFixed64:
    case kFixed32: {
      const size_t n = wire_type == kFixed64 ? 8 : 4;
      if (n > end - c.pos() || !c.Take(n, out != nullptr ? &pieces : nullptr)) return false;
      break;
    }
    case kLengthDelimited: {
      uint64_t len;
      if (!c.Varint(&len) || c.pos() > end || len > end - c.pos()) return false;
      if (out != nullptr) AppendVarint(len, out);
      if (!c.Take(len, out != nullptr ? &pieces : nullptr)) return false;
      break;
    }
    case kStartGroup: {
      if (depth >= kMaxGroupDepth) return false;
      while (true) {  // Fields up to the group's own end tag.
        uint64_t tag;
        if (!c.Tag(&tag) || c.pos() > end) return false;
        if (out != nullptr) AppendVarint(tag, out);
        const uint64_t inner = tag >> 3;
        const uint32_t inner_type = static_cast<uint32_t>(tag & 7);
        if (inner == 0 || inner > kMaxFieldNumber) return false;
        if (inner_type == kEndGroup) return inner == field;
        if (!PassValue(c, inner, inner_type, end, out, depth + 1)) return false;
      }
    }
    default:
      return false;  // An end tag without its group, and the undefined types 6 and 7.
  }
  if (out != nullptr) {
    for (absl::string_view p : pieces) out->append(p.data(), p.size());
  }
  return true;
}

// Parses one PartitionChunk that ends at `end`.
bool ParseChunk(SliceCursor& c, size_t end, ChunkView* chunk) {
  while (c.pos() < end) {
    uint64_t tag;
    if (!c.Tag(&tag) || c.pos() > end) return false;
    const uint64_t field = tag >> 3;
    const uint32_t wire_type = static_cast<uint32_t>(tag & 7);
    if (field == 0 || field > kMaxFieldNumber) return false;
    uint64_t v;
    if (wire_type == kVarint &&
        (field == kChunkPartitionId || field == kChunkOffset || field == kChunkVersion)) {
      if (!c.Varint(&v) || c.pos() > end) return false;
      if (field == kChunkPartitionId) chunk->partition_id = static_cast<uint32_t>(v);
      if (field == kChunkOffset) chunk->offset = v;
      if (field == kChunkVersion) chunk->version = v;
    } else if (wire_type == kLengthDelimited && field == kChunkData) {
      if (!c.Varint(&v) || c.pos() > end || v > end - c.pos()) return false;
      chunk->pieces.clear();  // A repeated field: the last one counts, as in protobuf.
      if (!c.Take(v, &chunk->pieces)) return false;
      chunk->payload_bytes = v;
    } else if (!PassValue(c, field, wire_type, end, nullptr)) {  // Unknown: skipped.
      return false;
    }
  }
  return c.pos() == end;
}

}  // namespace

ChunkFrameWriter::ChunkFrameWriter(absl::string_view fields, uint32_t chunks_field,
                                   const std::vector<ChunkHeader>& chunks) {
  size_t total = fields.size();
  std::vector<size_t> body(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    body[i] = ChunkBodySize(chunks[i]);
    total += VarintSize(Tag(chunks_field, kLengthDelimited)) + VarintSize(body[i]) + body[i];
  }
  slice_ = grpc::Slice(total);  // Not initialised: every byte is written below or by the caller.
  char* p = const_cast<char*>(reinterpret_cast<const char*>(slice_.begin()));
  if (!fields.empty()) std::memcpy(p, fields.data(), fields.size());
  p += fields.size();
  payloads_.reserve(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ChunkHeader& c = chunks[i];
    p = PutVarint(Tag(chunks_field, kLengthDelimited), p);
    p = PutVarint(body[i], p);
    p = PutVarint(Tag(kChunkPartitionId, kVarint), p);
    p = PutVarint(c.partition_id, p);
    p = PutVarint(Tag(kChunkOffset, kVarint), p);
    p = PutVarint(c.offset, p);
    p = PutVarint(Tag(kChunkVersion, kVarint), p);
    p = PutVarint(c.version, p);
    p = PutVarint(Tag(kChunkData, kLengthDelimited), p);
    p = PutVarint(c.payload_bytes, p);
    payloads_.push_back(p);
    p += c.payload_bytes;
  }
}

void ChunkView::CopyPayload(char* dst) const {
  for (absl::string_view p : pieces) {
    std::memcpy(dst, p.data(), p.size());
    dst += p.size();
  }
}

void ChunkView::DecodePayload(v1::DType dtype, int64_t first, int64_t n, float* dst) const {
  const size_t width = WireBytesPerElement(dtype);
  const size_t begin = static_cast<size_t>(first) * width;
  const size_t end = begin + static_cast<size_t>(n) * width;
  char carry[4];  // An element split between two pieces.
  size_t carried = 0, at = 0;
  for (absl::string_view piece : pieces) {
    const size_t lo = std::max(begin, at), hi = std::min(end, at + piece.size());
    const size_t piece_at = at;
    at += piece.size();
    if (lo >= hi) continue;
    const char* p = piece.data() + (lo - piece_at);
    size_t len = hi - lo;
    if (carried > 0) {
      const size_t k = std::min(width - carried, len);
      std::memcpy(carry + carried, p, k);
      carried += k;
      p += k;
      len -= k;
      if (carried < width) continue;
      DecodeToFp32(dtype, absl::string_view(carry, width), 1, dst++).IgnoreError();
      carried = 0;
    }
    const size_t whole = len / width;
    DecodeToFp32(dtype, absl::string_view(p, whole * width), static_cast<int64_t>(whole), dst)
        .IgnoreError();  // Sizes match by construction.
    dst += whole;
    p += whole * width;
    len -= whole * width;
    std::memcpy(carry, p, len);
    carried = len;
  }
}

bool ChunkFrameReader::Parse(grpc::ByteBuffer* buffer, uint32_t chunks_field, size_t max_chunks) {
  slices_.clear();
  fields_.clear();
  chunks_.clear();
  truncated_ = false;
  if (buffer->Valid() && !buffer->Dump(&slices_).ok()) return false;
  buffer->Clear();
  SliceCursor c(slices_);
  while (c.pos() < c.total()) {
    uint64_t tag;
    if (!c.Tag(&tag)) return false;
    const uint64_t field = tag >> 3;
    const uint32_t wire_type = static_cast<uint32_t>(tag & 7);
    if (field == 0 || field > kMaxFieldNumber) return false;
    if (field == chunks_field && wire_type == kLengthDelimited) {
      uint64_t len;
      if (!c.Varint(&len) || len > c.total() - c.pos()) return false;
      ChunkView& chunk = chunks_.emplace_back();
      if (!ParseChunk(c, c.pos() + len, &chunk)) return false;
      if (chunks_.size() > max_chunks) {
        truncated_ = true;
        return true;
      }
      continue;
    }
    AppendVarint(tag, &fields_);
    if (!PassValue(c, field, wire_type, c.total(), &fields_)) return false;
  }
  return true;
}

size_t ChunkFrameReader::payload_bytes() const {
  size_t bytes = 0;
  for (const ChunkView& c : chunks_) bytes += c.payload_bytes;
  return bytes;
}

}  // namespace spotps
