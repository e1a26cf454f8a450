// ChunkFrame: Init, Pull and Push stream messages whose PartitionChunk
// payloads are written straight into, and read straight out of, gRPC slices,
// so bulk tensor bytes skip protobuf's copy (and its zero-filled strings) on
// both ends. The bytes on the wire are ordinary protobuf messages.
#ifndef SPOTPS_COMMON_CHUNK_FRAME_H_
#define SPOTPS_COMMON_CHUNK_FRAME_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "spotps/v1/parameter_server.pb.h"

namespace spotps {

// Field number of `chunks` in each message type (parameter_server.proto).
inline constexpr uint32_t kInitChunksField = 3;
inline constexpr uint32_t kPullChunksField = 2;
inline constexpr uint32_t kPushChunksField = 4;

// Where one chunk goes in an outgoing message.
struct ChunkHeader {
  uint32_t partition_id = 0;
  uint64_t offset = 0;
  uint64_t version = 0;
  size_t payload_bytes = 0;
};

// Lays out one outgoing message in a single slice: `fields` (every field but
// the chunks, already in wire format, e.g. a header message's
// SerializeAsString()), then each chunk. The caller writes each payload in
// place through payload(i), then takes the message. Nothing is zero-filled.
class ChunkFrameWriter {
 public:
  ChunkFrameWriter(absl::string_view fields, uint32_t chunks_field,
                   const std::vector<ChunkHeader>& chunks);

  char* payload(size_t i) { return payloads_[i]; }
  size_t size() const { return slice_.size(); }
  // The message, sharing (not copying) the slice.
  grpc::ByteBuffer Take() const { return grpc::ByteBuffer(&slice_, 1); }

 private:
  grpc::Slice slice_;
  std::vector<char*> payloads_;
};

// A chunk of a received message; its payload stays in the message's slices,
// as one or more pieces (a payload may cross slice borders anywhere, even
// inside an element).
struct ChunkView {
  uint32_t partition_id = 0;
  uint64_t offset = 0;
  uint64_t version = 0;
  absl::InlinedVector<absl::string_view, 2> pieces;
  size_t payload_bytes = 0;

  // Copies the whole payload to dst (payload_bytes bytes).
  void CopyPayload(char* dst) const;
  // Decodes payload elements [first, first + n) of `dtype` to FP32 into dst.
  // The caller has checked that they lie within the payload.
  void DecodePayload(v1::DType dtype, int64_t first, int64_t n, float* dst) const;
};

// One received message, parsed in place. Holds references to the message's
// slices, so its views stay valid for as long as it lives (or until the next
// Parse).
class ChunkFrameReader {
 public:
  // Takes `buffer`'s slices and parses them as a message whose chunks are
  // field `chunks_field`. False if the bytes are not a well-formed protobuf
  // message (bad tag, varint or length, a field running past its message,
  // a group without its end). Every field but the chunks is
  // left in fields(), in wire format, for protobuf to parse. Past
  // `max_chunks` chunks it stops and returns true with max_chunks + 1 of
  // them, so that a flood of empty chunks costs no memory before the caller
  // refuses it.
  bool Parse(grpc::ByteBuffer* buffer, uint32_t chunks_field,
             size_t max_chunks = std::numeric_limits<size_t>::max());

  // The last Parse stopped past max_chunks (fields after that point were
  // not read).
  bool truncated() const { return truncated_; }
  const std::string& fields() const { return fields_; }
  const std::vector<ChunkView>& chunks() const { return chunks_; }
  size_t payload_bytes() const;

 private:
  std::vector<grpc::Slice> slices_;
  std::string fields_;
  std::vector<ChunkView> chunks_;
  bool truncated_ = false;
};

}  // namespace spotps

#endif  // SPOTPS_COMMON_CHUNK_FRAME_H_
