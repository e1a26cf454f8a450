#include "ps/rpc/push_staging.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/int8_blocks.h"
#include "common/tensor_codec.h"
#include "ps/store/optimizer.h"

namespace spotps {
namespace {

// Blocks come in powers of two from 64 KiB, so pushes of slightly different
// shapes (a smaller last partition) share them.
size_t SizeClass(size_t bytes) {
  size_t size = size_t{64} << 10;
  while (size < bytes) size <<= 1;
  return size;
}

}  // namespace

StagingPool::Block StagingPool::Take(size_t bytes) {
  const size_t size = SizeClass(bytes);
  {
    absl::MutexLock lock(&mu_);
    auto it = idle_.find(size);
    if (it != idle_.end() && !it->second.empty()) {
      Block block{std::move(it->second.back()), size};
      it->second.pop_back();
      idle_bytes_ -= size;
      return block;
    }
  }
  // Not value-initialised: staging writes every byte it later reads.
  return Block{std::unique_ptr<char[]>(new char[size]), size};
}

void StagingPool::Give(Block block) {
  if (block.data == nullptr) return;
  absl::MutexLock lock(&mu_);
  if (idle_bytes_ + block.capacity > max_idle_bytes_) return;  // Freed.
  idle_bytes_ += block.capacity;
  idle_[block.capacity].push_back(std::move(block.data));
}

size_t StagingPool::idle_bytes() const {
  absl::MutexLock lock(&mu_);
  return idle_bytes_;
}

PushStaging::PushStaging(StagingPool* pool, const AnnouncedElements& announced, v1::DType dtype)
    : pool_(pool), dtype_(dtype), staged_dtype_(dtype == v1::DTYPE_INT8 ? v1::DTYPE_FP32 : dtype) {
  const size_t width = WireBytesPerElement(staged_dtype_);
  for (const auto& [id, n] : announced) regions_[id].capacity = n * width;
}

PushStaging::~PushStaging() {
  for (auto& [id, region] : regions_) pool_->Give(std::move(region.block));
}

absl::Status PushStaging::Add(const ChunkView& chunk) {
  if (dtype_ == v1::DTYPE_INT8) return AddInt8(chunk);
  const size_t bytes = chunk.payload_bytes;
  char* dst = Reserve(chunk.partition_id, bytes);
  const bool within = CopyAndCheck(chunk, dst);
  ranges_.push_back(PayloadRange{chunk.partition_id, chunk.offset, absl::string_view(dst, bytes),
                                 chunk.version, within});
  return absl::OkStatus();
}

char* PushStaging::Reserve(uint32_t partition_id, size_t bytes) {
  auto it = regions_.find(partition_id);
  if (it == regions_.end() || bytes > it->second.capacity - it->second.used) {
    return strays_.emplace_back(bytes, '\0').data();
  }
  Region& r = it->second;
  if (r.block.data == nullptr) r.block = pool_->Take(r.capacity);
  char* dst = r.block.data.get() + r.used;
  r.used += bytes;
  return dst;
}

absl::Status PushStaging::AddInt8(const ChunkView& chunk) {
  auto refuse = [&chunk](const absl::Status& s) {
    return absl::InvalidArgumentError(
        absl::StrFormat("push chunk of partition %d: %s", chunk.partition_id, s.message()));
  };
  absl::StatusOr<int64_t> n = Int8PayloadElements(chunk.offset, chunk.payload_bytes);
  if (!n.ok()) return refuse(n.status());
  // A payload in one slice (the usual case) decodes in place; one split
  // across slices is gathered first, since scales and codes may straddle.
  absl::string_view payload;
  if (chunk.pieces.size() == 1) {
    payload = chunk.pieces[0];
  } else {
    int8_payload_.resize(chunk.payload_bytes);
    chunk.CopyPayload(int8_payload_.data());
    payload = int8_payload_;
  }
  const size_t bytes = static_cast<size_t>(*n) * sizeof(float);
  char* dst = Reserve(chunk.partition_id, bytes);
  // A scale within kMaxGradientMagnitude / 127 bounds every element.
  absl::Status decoded = DecodeInt8Blocks(payload, chunk.offset, *n, kMaxGradientMagnitude,
                                          reinterpret_cast<float*>(dst));
  if (!decoded.ok()) return refuse(decoded);
  ranges_.push_back(PayloadRange{chunk.partition_id, chunk.offset, absl::string_view(dst, bytes),
                                 chunk.version, /*within_gradient_bound=*/true});
  return absl::OkStatus();
}

bool PushStaging::CopyAndCheck(const ChunkView& chunk, char* dst) const {
  // Windows small enough that the check reads what the copy just wrote from
  // cache; a multiple of 4 bytes, so they end on element borders.
  constexpr size_t kWindow = size_t{64} << 10;
  bool within = true;
  size_t piece = 0, piece_at = 0;
  for (size_t done = 0; done < chunk.payload_bytes;) {
    const size_t window_end = std::min(chunk.payload_bytes, done + kWindow);
    for (size_t at = done; at < window_end;) {
      const absl::string_view p = chunk.pieces[piece];
      const size_t k = std::min(window_end - at, p.size() - piece_at);
      std::memcpy(dst + at, p.data() + piece_at, k);
      at += k;
      piece_at += k;
      if (piece_at == p.size()) {
        ++piece;
        piece_at = 0;
      }
    }
    within = within && AllWithin(dtype_, absl::string_view(dst + done, window_end - done),
                                 kMaxGradientMagnitude);
    done = window_end;
  }
  return within;
}

}  // namespace spotps
