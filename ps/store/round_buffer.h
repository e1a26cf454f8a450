// RoundBuffer: the gradients a shard in sync mode holds for the open round,
// until shard 0's coordinator names the ones to apply.
#ifndef SPOTPS_PS_STORE_ROUND_BUFFER_H_
#define SPOTPS_PS_STORE_ROUND_BUFFER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ps/store/payload_range.h"
#include "spotps/v1/parameter_server.pb.h"

namespace spotps {

// Owns a copy of each held gradient, by push id. Promises: at most
// `capacity` gradients at once; a push id is held once; MeanInto sums in
// push-id order, so a round's result does not depend on the order in which
// its gradients arrived. Not thread-safe: the ShardStore serializes access.
class RoundBuffer {
 public:
  // One gradient's payload, owned. Built outside any lock (it copies).
  struct Gradient {
    struct Piece {
      uint64_t offset = 0;
      std::string bytes;
    };
    v1::DType dtype = v1::DTYPE_FP32;
    float scale = 1.0f;  // The push's gradient_scale: the pieces count times this.
    std::map<uint32_t, std::vector<Piece>> partitions;
  };
  // Copies validated ranges (no overlaps; whole partitions in sync mode).
  static Gradient Copy(v1::DType dtype, const std::vector<PayloadRange>& ranges,
                       float scale = 1.0f);
  // Adds g's pieces of `partition`, decoded to FP32 and times g.scale, into
  // `out` (the partition's elements); false if g carries none of the
  // partition.
  static bool AddPartitionInto(const Gradient& g, uint32_t partition, float* out);

  explicit RoundBuffer(size_t capacity) : capacity_(capacity) {}

  // Holds `gradient` under `push_id`. Returns false (and keeps the first) if
  // the id is already held; RESOURCE_EXHAUSTED when `capacity` are held.
  absl::StatusOr<bool> Add(absl::string_view push_id, Gradient gradient);
  bool Holds(absl::string_view push_id) const { return held_.count(std::string(push_id)) != 0; }
  size_t size() const { return held_.size(); }
  size_t capacity() const { return capacity_; }

  // Writes the mean of the held gradients `sorted_ids` (ascending, all held)
  // for elements [0, n) of `partition` into out[0, n).
  void MeanInto(const std::vector<std::string>& sorted_ids, uint32_t partition, int64_t n,
                float* out) const;
  void Clear() { held_.clear(); }

 private:
  const size_t capacity_;
  std::map<std::string, Gradient> held_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_STORE_ROUND_BUFFER_H_
