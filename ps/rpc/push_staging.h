// PushStaging: the payload of one push stream, copied out of gRPC's receive
// buffers as each message arrives into memory that is reused from push to
// push, so a push in flight holds neither gRPC's buffers nor freshly faulted
// pages, and nothing is applied before the stream has ended.
#ifndef SPOTPS_PS_RPC_PUSH_STAGING_H_
#define SPOTPS_PS_RPC_PUSH_STAGING_H_

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/chunk_frame.h"
#include "ps/store/payload_range.h"

namespace spotps {

// Owns blocks of memory that pushes stage into. Promises: a block taken has
// at least the bytes asked for (contents undefined); blocks given back are
// kept for the next push, up to `max_idle_bytes` in all, so a steady stream
// of pushes of one shape allocates nothing after its first. Thread-safe.
class StagingPool {
 public:
  explicit StagingPool(size_t max_idle_bytes = size_t{1} << 30) : max_idle_bytes_(max_idle_bytes) {}
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  struct Block {
    std::unique_ptr<char[]> data;
    size_t capacity = 0;
  };
  Block Take(size_t bytes);
  void Give(Block block);

  size_t idle_bytes() const;

 private:
  const size_t max_idle_bytes_;
  mutable absl::Mutex mu_;
  std::map<size_t, std::vector<std::unique_ptr<char[]>>> idle_ ABSL_GUARDED_BY(mu_);  // By size.
  size_t idle_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// One push stream's chunks, staged per announced partition. Promises: every
// chunk added becomes one PayloadRange (same partition, offset, version and
// bytes, in arrival order), so the store validates and applies exactly what
// the stream carried, in whatever order its partitions and offsets came; a
// partition's staged bytes never exceed what was announced for it (a chunk
// that would overflow them, or of a partition not announced, is kept apart,
// for the store to refuse precisely); each chunk's elements are checked
// against kMaxGradientMagnitude while they are still in cache, and its range
// says so when they pass (PayloadRange::within_gradient_bound). Blocks go
// back to the pool on destruction.
class PushStaging {
 public:
  // `dtype`: the push's wire dtype (FP32, BF16 or INT8).
  PushStaging(StagingPool* pool, const AnnouncedElements& announced, v1::DType dtype);
  ~PushStaging();
  PushStaging(const PushStaging&) = delete;
  PushStaging& operator=(const PushStaging&) = delete;

  // INVALID_ARGUMENT, naming the partition, for an int8 chunk that does
  // not decode (common/int8_blocks.h); the push is then to be refused.
  absl::Status Add(const ChunkView& chunk);
  const std::vector<PayloadRange>& ranges() const { return ranges_; }
  // The dtype of the staged ranges: FP32 for an int8 push.
  v1::DType staged_dtype() const { return staged_dtype_; }

 private:
  struct Region {
    size_t capacity = 0;  // Announced elements * width.
    size_t used = 0;
    StagingPool::Block block;  // Taken at the partition's first chunk.
  };

  // Copies the chunk's payload to dst; true if every element is within the
  // gradient bound.
  bool CopyAndCheck(const ChunkView& chunk, char* dst) const;
  // Where `bytes` staged bytes of the chunk's partition go.
  char* Reserve(uint32_t partition_id, size_t bytes);
  absl::Status AddInt8(const ChunkView& chunk);

  StagingPool* const pool_;
  const v1::DType dtype_;
  const v1::DType staged_dtype_;
  std::string int8_payload_;  // An int8 chunk's payload, made contiguous.
  std::map<uint32_t, Region> regions_;
  std::deque<std::string> strays_;  // Chunks no region takes.
  std::vector<PayloadRange> ranges_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_PUSH_STAGING_H_
