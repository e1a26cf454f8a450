// spotps-ctl export / import: the weights a cluster holds to and from a
// safetensors file, under Hugging Face GPT-2 names (client/hf_gpt2_names.h)
// for spotps's GPT, or under the model's own tensor names (a TorchScript
// model's named_parameters()).
#ifndef SPOTPS_TOOLS_CTL_SAFETENSORS_TRANSFER_H_
#define SPOTPS_TOOLS_CTL_SAFETENSORS_TRANSFER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/cluster.h"
#include "client/safetensors_file.h"

namespace spotps {

// Which names an export writes: kAuto is Hugging Face's for a layout of
// spotps's GPT and the model's own otherwise.
enum class TensorNaming { kAuto, kHuggingFaceGpt2, kModule };
// "auto", "hf" or "module"; INVALID_ARGUMENT otherwise.
absl::StatusOr<TensorNaming> ParseTensorNaming(absl::string_view name);

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
// spotps.layout_fingerprint, spotps.names (hf or module). FAILED_PRECONDITION
// if the shards hold no model, or kHuggingFaceGpt2 for a model that is not
// spotps's GPT.
absl::StatusOr<TransferSummary> ExportSafetensors(Cluster& cluster, const std::string& path,
                                                  SafetensorsDType dtype,
                                                  TensorNaming naming = TensorNaming::kAuto);

// Initialises shards that hold no model yet with a file's weights through
// Cluster::Init (so every shard validates them as any trainer's init). A
// file with Hugging Face GPT-2 names gives the GPT it describes, in spotps's
// order; any other file its tensors under their own names, in the order its
// spotps.layout metadata lists (an export's), else the file's, so trainers
// with the matching --model join it. FAILED_PRECONDITION if the shards
// already hold a model (theirs is kept: an import never overwrites weights);
// INVALID_ARGUMENT for a malformed file.
absl::StatusOr<TransferSummary> ImportSafetensors(Cluster& cluster, const std::string& path);

}  // namespace spotps

#endif  // SPOTPS_TOOLS_CTL_SAFETENSORS_TRANSFER_H_
