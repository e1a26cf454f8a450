#include "tools/ctl/safetensors_transfer.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/hf_gpt2_names.h"

namespace spotps {
namespace {

// "name[d0,d1];name[d0];..." in layout order.
std::string LayoutText(const ModelLayout& layout) {
  return absl::StrJoin(layout.tensors(), ";", [](std::string* out, const TensorSlot& slot) {
    absl::StrAppend(out, slot.name, "[", absl::StrJoin(slot.shape, ","), "]");
  });
}

}  // namespace

absl::StatusOr<TransferSummary> ExportSafetensors(Cluster& cluster, const std::string& path,
                                                  SafetensorsDType dtype) {
  if (absl::Status s = cluster.FetchLayout(); !s.ok()) return s;
  const ModelLayout& layout = cluster.layout();
  WeightSnapshot weights;
  if (absl::Status s = cluster.Pull(v1::DTYPE_FP32, &weights); !s.ok()) return s;
  absl::StatusOr<std::vector<v1::StatsResponse>> stats = cluster.Stats();
  if (!stats.ok()) return stats.status();

  SafetensorsContents file;
  absl::StatusOr<std::vector<SafetensorsTensor>> tensors = ToHfGpt2Tensors(layout, weights.values);
  if (!tensors.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the shards hold a model that is not spotps's GPT: ", tensors.status().message()));
  }
  file.tensors = *std::move(tensors);
  TransferSummary summary;
  for (const v1::StatsResponse& s : *stats) {
    summary.global_step = std::max<uint64_t>(summary.global_step, s.global_step());
  }
  file.metadata["format"] = "pt";  // What transformers' loader expects.
  file.metadata["spotps.global_step"] = absl::StrCat(summary.global_step);
  file.metadata["spotps.versions"] = absl::StrJoin(weights.versions, ",");
  file.metadata["spotps.num_shards"] = absl::StrCat(cluster.num_shards());
  file.metadata["spotps.layout"] = LayoutText(layout);
  file.metadata["spotps.layout_fingerprint"] = absl::StrFormat("0x%016x", layout.fingerprint());
  if (absl::Status s = WriteSafetensorsFile(path, file, dtype); !s.ok()) return s;
  summary.tensors = int64_t(layout.tensors().size());
  summary.elements = layout.total_elements();
  summary.layout = layout.Summary();
  return summary;
}

absl::StatusOr<TransferSummary> ImportSafetensors(Cluster& cluster, const std::string& path) {
  absl::StatusOr<SafetensorsContents> file = ReadSafetensorsFile(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<ModelLayout> layout = GptLayoutFromHfGpt2(*file);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<std::vector<float>> flat = FlatWeightsFromHfGpt2(*layout, *file);
  if (!flat.ok()) return flat.status();
  file->tensors.clear();  // The flat copy is all that is needed now.
  absl::StatusOr<bool> applied = cluster.Init(*layout, *flat);
  if (!applied.ok()) return applied.status();
  if (!*applied) {
    return absl::FailedPreconditionError(
        "the shards already hold this model; their weights were kept (import only into shards "
        "that hold no model yet)");
  }
  TransferSummary summary;
  summary.tensors = int64_t(layout->tensors().size());
  summary.elements = layout->total_elements();
  summary.layout = layout->Summary();
  return summary;
}

}  // namespace spotps
