#include "client/hf_gpt2_names.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace spotps {
namespace {

constexpr absl::string_view kPrefix = "transformer.";

// spotps's name inside a block -> Hugging Face's, and whether the stored
// matrix is a Conv1D weight ([in, out]).
struct BlockTensor {
  absl::string_view spotps;
  absl::string_view hf;
  bool transposed;
};
// In GptModel's registration order (TransformerBlock: ln_1, attn, ln_2, mlp).
constexpr BlockTensor kBlockTensors[] = {
    {"ln_1.weight", "ln_1.weight", false},
    {"ln_1.bias", "ln_1.bias", false},
    {"attn.qkv.weight", "attn.c_attn.weight", true},
    {"attn.qkv.bias", "attn.c_attn.bias", false},
    {"attn.proj.weight", "attn.c_proj.weight", true},
    {"attn.proj.bias", "attn.c_proj.bias", false},
    {"ln_2.weight", "ln_2.weight", false},
    {"ln_2.bias", "ln_2.bias", false},
    {"mlp.fc.weight", "mlp.c_fc.weight", true},
    {"mlp.fc.bias", "mlp.c_fc.bias", false},
    {"mlp.proj.weight", "mlp.c_proj.weight", true},
    {"mlp.proj.bias", "mlp.c_proj.bias", false},
};
constexpr absl::string_view kTopTensors[] = {"wte.weight", "wpe.weight", "ln_f.weight",
                                             "ln_f.bias"};

// Splits "<prefix>N.<rest>" into N and rest.
bool SplitBlockName(absl::string_view name, absl::string_view prefix, int64_t* index,
                    absl::string_view* rest) {
  if (!absl::ConsumePrefix(&name, prefix)) return false;
  const size_t dot = name.find('.');
  if (dot == 0 || dot == absl::string_view::npos) return false;
  const absl::string_view digits = name.substr(0, dot);
  if (!std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) || digits.size() > 6 ||
      !absl::SimpleAtoi(digits, index)) {
    return false;
  }
  *rest = name.substr(dot + 1);
  return true;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::vector<int64_t> StoredShape(const std::vector<int64_t>& shape, bool transposed) {
  if (!transposed || shape.size() != 2) return shape;
  return {shape[1], shape[0]};
}

// Copies a [rows, cols] matrix into dst as [cols, rows].
void Transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
  }
}

// A file name without the GPT2LMHeadModel prefix.
absl::string_view Unprefixed(absl::string_view name) {
  absl::ConsumePrefix(&name, kPrefix);
  return name;
}

// Buffers, not parameters: the causal mask GPT-2 files from older
// transformers versions carry.
bool IsMaskBuffer(absl::string_view name) {
  int64_t index;
  absl::string_view rest;
  return SplitBlockName(name, "h.", &index, &rest) &&
         (rest == "attn.bias" || rest == "attn.masked_bias");
}

absl::Status Refused(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("GPT-2 weights: ", what));
}

}  // namespace

absl::StatusOr<HfGpt2Name> HfGpt2NameFor(absl::string_view spotps_name) {
  for (absl::string_view top : kTopTensors) {
    if (spotps_name == top) return HfGpt2Name{absl::StrCat(kPrefix, top), false};
  }
  int64_t index;
  absl::string_view rest;
  if (SplitBlockName(spotps_name, "blocks.", &index, &rest)) {
    for (const BlockTensor& t : kBlockTensors) {
      if (rest == t.spotps) {
        return HfGpt2Name{absl::StrCat(kPrefix, "h.", index, ".", t.hf), t.transposed};
      }
    }
  }
  return absl::NotFoundError(
      absl::StrCat("'", spotps_name, "' is not a parameter of spotps's GPT model"));
}

absl::StatusOr<std::vector<SafetensorsTensor>> ToHfGpt2Tensors(const ModelLayout& layout,
                                                               absl::Span<const float> flat) {
  if (int64_t(flat.size()) != layout.total_elements()) {
    return Refused(absl::StrCat(flat.size(), " values for a layout of ", layout.total_elements()));
  }
  std::vector<SafetensorsTensor> out;
  out.reserve(layout.tensors().size());
  for (const TensorSlot& slot : layout.tensors()) {
    absl::StatusOr<HfGpt2Name> name = HfGpt2NameFor(slot.name);
    if (!name.ok()) return name.status();
    SafetensorsTensor t;
    t.name = name->hf_name;
    const bool transpose = name->transposed && slot.shape.size() == 2;
    t.shape = StoredShape(slot.shape, transpose);
    const float* src = flat.data() + slot.flat_offset;
    if (transpose) {
      t.values.resize(size_t(slot.num_elements));
      Transpose(src, slot.shape[0], slot.shape[1], t.values.data());
    } else {
      t.values.assign(src, src + slot.num_elements);
    }
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<std::vector<float>> FlatWeightsFromHfGpt2(const ModelLayout& layout,
                                                         const SafetensorsContents& file) {
  // The file's tensors by unprefixed name; "wte.weight" and
  // "transformer.wte.weight" together would be ambiguous.
  std::map<absl::string_view, const SafetensorsTensor*> by_name;
  const SafetensorsTensor* lm_head = nullptr;
  for (const SafetensorsTensor& t : file.tensors) {
    if (t.name == "lm_head.weight") {
      lm_head = &t;
      continue;
    }
    const absl::string_view name = Unprefixed(t.name);
    if (IsMaskBuffer(name)) continue;
    if (!by_name.emplace(name, &t).second) {
      return Refused(
          absl::StrCat("'", name, "' appears with and without the 'transformer.' prefix"));
    }
  }
  std::vector<float> flat(size_t(layout.total_elements()));
  for (const TensorSlot& slot : layout.tensors()) {
    absl::StatusOr<HfGpt2Name> name = HfGpt2NameFor(slot.name);
    if (!name.ok()) return name.status();
    const auto found = by_name.find(Unprefixed(name->hf_name));
    if (found == by_name.end()) {
      return Refused(
          absl::StrCat("the file lacks '", name->hf_name, "' (spotps '", slot.name, "')"));
    }
    const SafetensorsTensor& t = *found->second;
    const bool transpose = name->transposed && slot.shape.size() == 2;
    const std::vector<int64_t> want = StoredShape(slot.shape, transpose);
    if (t.shape != want) {
      return Refused(absl::StrCat("'", t.name, "' has shape ", ShapeText(t.shape),
                                  ", the model needs ", ShapeText(want)));
    }
    float* dst = flat.data() + slot.flat_offset;
    if (transpose) {
      Transpose(t.values.data(), want[0], want[1], dst);
    } else {
      std::copy(t.values.begin(), t.values.end(), dst);
    }
    by_name.erase(found);
  }
  if (!by_name.empty()) {
    return Refused(absl::StrCat("the model has no tensor for '", by_name.begin()->second->name,
                                "' (", by_name.size(), " such)"));
  }
  if (lm_head != nullptr) {
    const TensorSlot* wte = layout.Find("wte.weight");
    if (wte == nullptr || lm_head->shape != wte->shape ||
        !std::equal(lm_head->values.begin(), lm_head->values.end(),
                    flat.begin() + wte->flat_offset)) {
      return Refused("'lm_head.weight' differs from the token embedding; spotps ties the two");
    }
  }
  return flat;
}

absl::StatusOr<ModelLayout> GptLayoutFromHfGpt2(const SafetensorsContents& file) {
  const SafetensorsTensor* wte = nullptr;
  const SafetensorsTensor* wpe = nullptr;
  int64_t n_layer = 0;
  for (const SafetensorsTensor& t : file.tensors) {
    const absl::string_view name = Unprefixed(t.name);
    int64_t index;
    absl::string_view rest;
    if (name == "wte.weight") wte = &t;
    if (name == "wpe.weight") wpe = &t;
    if (SplitBlockName(name, "h.", &index, &rest)) n_layer = std::max(n_layer, index + 1);
  }
  if (wte == nullptr || wpe == nullptr || wte->shape.size() != 2 || wpe->shape.size() != 2 ||
      wte->shape[1] != wpe->shape[1]) {
    return Refused("no wte.weight [vocab, width] and wpe.weight [context, width] of one width");
  }
  if (n_layer == 0) return Refused("no transformer blocks (h.N.*)");
  const int64_t c = wte->shape[1];
  const std::map<absl::string_view, std::vector<int64_t>> block_shapes = {
      {"ln_1.weight", {c}},
      {"ln_1.bias", {c}},
      {"attn.qkv.weight", {3 * c, c}},
      {"attn.qkv.bias", {3 * c}},
      {"attn.proj.weight", {c, c}},
      {"attn.proj.bias", {c}},
      {"ln_2.weight", {c}},
      {"ln_2.bias", {c}},
      {"mlp.fc.weight", {4 * c, c}},
      {"mlp.fc.bias", {4 * c}},
      {"mlp.proj.weight", {c, 4 * c}},
      {"mlp.proj.bias", {c}}};
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors = {{"wte.weight", wte->shape},
                                                                       {"wpe.weight", wpe->shape}};
  for (int64_t i = 0; i < n_layer; ++i) {
    for (const BlockTensor& t : kBlockTensors) {
      tensors.emplace_back(absl::StrCat("blocks.", i, ".", t.spotps), block_shapes.at(t.spotps));
    }
  }
  tensors.emplace_back("ln_f.weight", std::vector<int64_t>{c});
  tensors.emplace_back("ln_f.bias", std::vector<int64_t>{c});
  return ModelLayout::Create(std::move(tensors));
}

}  // namespace spotps
