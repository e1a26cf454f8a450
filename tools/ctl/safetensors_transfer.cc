#include "tools/ctl/safetensors_transfer.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/hf_gpt2_names.h"

namespace spotps {
namespace {

// "name[d0,d1];name[d0];..." in layout order.
std::string LayoutText(const ModelLayout& layout) {
  return absl::StrJoin(layout.tensors(), ";", [](std::string* out, const TensorSlot& slot) {
    absl::StrAppend(out, slot.name, "[", absl::StrJoin(slot.shape, ","), "]");
  });
}

// The tensors of the flat space under the layout's own names.
absl::StatusOr<std::vector<SafetensorsTensor>> ModuleTensors(const ModelLayout& layout,
                                                             absl::Span<const float> flat) {
  std::vector<SafetensorsTensor> tensors;
  for (const TensorSlot& slot : layout.tensors()) {
    SafetensorsTensor t;
    t.name = slot.name;
    t.shape = slot.shape;
    t.values.assign(flat.begin() + slot.flat_offset,
                    flat.begin() + slot.flat_offset + slot.num_elements);
    tensors.push_back(std::move(t));
  }
  return tensors;
}

// A file's tensors as a layout: in the order its spotps.layout metadata
// lists them, if it has that, else in the file's own order.
absl::StatusOr<ModelLayout> ModuleLayout(const SafetensorsContents& file) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> specs;
  auto listed = file.metadata.find("spotps.layout");
  if (listed != file.metadata.end()) {
    for (absl::string_view entry : absl::StrSplit(listed->second, ';', absl::SkipEmpty())) {
      const std::string name(entry.substr(0, entry.find('[')));
      const SafetensorsTensor* t = file.Find(name);
      if (t == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the file's spotps.layout lists ", name, ", which the file does not hold"));
      }
      specs.push_back({t->name, t->shape});
    }
  } else {
    for (const SafetensorsTensor& t : file.tensors) specs.push_back({t.name, t.shape});
  }
  if (specs.size() != file.tensors.size()) {
    return absl::InvalidArgumentError("the file's spotps.layout does not list every tensor");
  }
  return ModelLayout::Create(std::move(specs));
}

absl::StatusOr<std::vector<float>> ModuleWeights(const ModelLayout& layout,
                                                 const SafetensorsContents& file) {
  std::vector<float> flat(layout.total_elements());
  for (const TensorSlot& slot : layout.tensors()) {
    const SafetensorsTensor* t = file.Find(slot.name);
    if (t == nullptr || t->shape != slot.shape) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", slot.name, " is missing or of "
                                                     "another shape"));
    }
    std::copy(t->values.begin(), t->values.end(), flat.begin() + slot.flat_offset);
  }
  return flat;
}

}  // namespace

absl::StatusOr<TensorNaming> ParseTensorNaming(absl::string_view name) {
  if (name == "auto") return TensorNaming::kAuto;
  if (name == "hf") return TensorNaming::kHuggingFaceGpt2;
  if (name == "module") return TensorNaming::kModule;
  return absl::InvalidArgumentError(
      absl::StrCat("--names=", name, ": want auto, hf (Hugging Face GPT-2) or module"));
}

absl::StatusOr<TransferSummary> ExportSafetensors(Cluster& cluster, const std::string& path,
                                                  SafetensorsDType dtype, TensorNaming naming) {
  if (absl::Status s = cluster.FetchLayout(); !s.ok()) return s;
  const ModelLayout& layout = cluster.layout();
  WeightSnapshot weights;
  if (absl::Status s = cluster.Pull(v1::DTYPE_FP32, &weights); !s.ok()) return s;
  absl::StatusOr<std::vector<v1::StatsResponse>> stats = cluster.Stats();
  if (!stats.ok()) return stats.status();

  SafetensorsContents file;
  absl::StatusOr<std::vector<SafetensorsTensor>> tensors =
      naming == TensorNaming::kModule ? ModuleTensors(layout, weights.values)
                                      : ToHfGpt2Tensors(layout, weights.values);
  if (!tensors.ok() && naming == TensorNaming::kAuto) {
    naming = TensorNaming::kModule;  // Not spotps's GPT: its own names.
    tensors = ModuleTensors(layout, weights.values);
  }
  if (!tensors.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the shards hold a model that is not spotps's GPT: ", tensors.status().message(),
        " (--names=module writes its own names)"));
  }
  file.tensors = *std::move(tensors);
  file.metadata["spotps.names"] = naming == TensorNaming::kModule ? "module" : "hf";
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
  const bool hf = GptLayoutFromHfGpt2(*file).ok();
  absl::StatusOr<ModelLayout> layout = hf ? GptLayoutFromHfGpt2(*file) : ModuleLayout(*file);
  if (!layout.ok()) return layout.status();
  absl::StatusOr<std::vector<float>> flat =
      hf ? FlatWeightsFromHfGpt2(*layout, *file) : ModuleWeights(*layout, *file);
  if (!flat.ok()) return flat.status();
  file->tensors.clear();  // The flat copy is all that is needed now.
  absl::StatusOr<InitOutcome> applied = cluster.Init(*layout, *flat);
  if (!applied.ok()) return applied.status();
  if (applied->nowhere()) {
    return absl::FailedPreconditionError(
        "the shards already hold this model; their weights were kept (import only into shards "
        "that hold no model yet)");
  }
  if (!applied->everywhere()) {
    // A shard that restarted without a checkpoint beside live ones: the
    // import filled it, but the model is now part imported, part trained.
    return absl::FailedPreconditionError(absl::StrFormat(
        "imported into %d of %d shards (those that held no model); the others already held "
        "this model and kept their weights",
        applied->shards_applied, applied->shards));
  }
  TransferSummary summary;
  summary.tensors = int64_t(layout->tensors().size());
  summary.elements = layout->total_elements();
  summary.layout = layout->Summary();
  return summary;
}

}  // namespace spotps
