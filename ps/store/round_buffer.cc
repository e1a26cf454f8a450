#include "ps/store/round_buffer.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/tensor_codec.h"

namespace spotps {

RoundBuffer::Gradient RoundBuffer::Copy(v1::DType dtype, const std::vector<PayloadRange>& ranges,
                                        float scale) {
  Gradient g;
  g.dtype = dtype;
  g.scale = scale;
  for (const PayloadRange& r : ranges) {
    g.partitions[r.partition_id].push_back(Gradient::Piece{r.offset, std::string(r.bytes)});
  }
  return g;
}

absl::StatusOr<bool> RoundBuffer::Add(absl::string_view push_id, Gradient gradient) {
  if (Holds(push_id)) return false;
  if (held_.size() >= capacity_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "this shard already holds %d gradients for the open round (--max_round_contributions)",
        capacity_));
  }
  held_.emplace(std::string(push_id), std::move(gradient));
  return true;
}

bool RoundBuffer::AddPartitionInto(const Gradient& g, uint32_t partition, float* out) {
  auto pieces = g.partitions.find(partition);
  if (pieces == g.partitions.end()) return false;
  const size_t width = WireBytesPerElement(g.dtype);
  std::vector<float> decoded;
  for (const Gradient::Piece& piece : pieces->second) {
    const int64_t count = static_cast<int64_t>(piece.bytes.size() / width);
    decoded.resize(count);
    DecodeToFp32(g.dtype, piece.bytes, count, decoded.data()).IgnoreError();  // Validated.
    float* dst = out + piece.offset;
    if (g.scale == 1.0f) {
      for (int64_t i = 0; i < count; ++i) dst[i] += decoded[i];
    } else if (g.dtype == v1::DTYPE_BF16) {
      // Each term rounded back to BF16, as if the client had scaled before
      // encoding: sums of a few BF16 values are exact in FP32, so the mean
      // does not depend on the order the pushes are added in (arrival
      // order under "avg", push ids under sync), and runs repeat bit for bit.
      for (int64_t i = 0; i < count; ++i) {
        dst[i] += Bf16ToFloat(FloatToBf16(decoded[i] * g.scale));
      }
    } else {
      for (int64_t i = 0; i < count; ++i) dst[i] += decoded[i] * g.scale;
    }
  }
  return true;
}

void RoundBuffer::MeanInto(const std::vector<std::string>& sorted_ids, uint32_t partition,
                           int64_t n, float* out) const {
  std::fill(out, out + n, 0.0f);
  for (const std::string& id : sorted_ids) AddPartitionInto(held_.at(id), partition, out);
  const float k = static_cast<float>(sorted_ids.size());
  for (int64_t i = 0; i < n; ++i) out[i] /= k;
}

}  // namespace spotps
