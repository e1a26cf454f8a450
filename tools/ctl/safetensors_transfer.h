// spotps-ctl export / import: the weights a cluster holds to and from a
// safetensors file with Hugging Face GPT-2 names (client/hf_gpt2_names.h).
#ifndef SPOTPS_TOOLS_CTL_SAFETENSORS_TRANSFER_H_
#define SPOTPS_TOOLS_CTL_SAFETENSORS_TRANSFER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/cluster.h"
#include "client/safetensors_file.h"

namespace spotps {

// What an export or import moved, for its one-line report.
struct TransferSummary {
  int64_t tensors = 0;
  int64_t elements = 0;
  uint64_t global_step = 0;  // Export: the highest shard global step.
  std::string layout;        // ModelLayout::Summary().
};

// Pulls the whole model in FP32 and writes it atomically to `path` as
// `dtype` (F32 or BF16), with metadata: format=pt, spotps.global_step,
// spotps.versions (every partition's version, in partition order; training
// may go on while the partitions are read), spotps.num_shards,
// spotps.layout (spotps's names and shapes, in layout order) and
// spotps.layout_fingerprint. FAILED_PRECONDITION if the shards hold no model
// or one that is not spotps's GPT.
absl::StatusOr<TransferSummary> ExportSafetensors(Cluster& cluster, const std::string& path,
                                                  SafetensorsDType dtype);

// Initialises shards that hold no model yet with a file's weights through
// Cluster::Init (so every shard validates them as any trainer's init). The
// layout is the GPT the file describes, in spotps's order, so trainers with
// the matching --model join it. FAILED_PRECONDITION if the shards already
// hold a model (theirs is kept: an import never overwrites weights);
// INVALID_ARGUMENT for a file that is malformed or not a GPT-2.
absl::StatusOr<TransferSummary> ImportSafetensors(Cluster& cluster, const std::string& path);

}  // namespace spotps

#endif  // SPOTPS_TOOLS_CTL_SAFETENSORS_TRANSFER_H_
