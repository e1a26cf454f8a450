// The Hugging Face GPT-2 names of spotps's GPT parameters, both ways.
//
// spotps's GptModel names its tensors after its LibTorch modules
// ("blocks.3.attn.qkv.weight", nn.Linear weights [out, in]); Hugging Face's
// GPT2LMHeadModel calls the same tensor "transformer.h.3.attn.c_attn.weight"
// and stores it as a Conv1D weight, [in, out]. The two models compute the
// same function (pre-LayerNorm blocks, eps 1e-5, tanh GELU, q|k|v split of
// one projection, token embedding tied to the output head), so a checkpoint
// moves between them by renaming and transposing four matrices per block:
// c_attn, attn.c_proj, c_fc, mlp.c_proj. "lm_head.weight" is the tied wte.
#ifndef SPOTPS_CLIENT_HF_GPT2_NAMES_H_
#define SPOTPS_CLIENT_HF_GPT2_NAMES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "client/safetensors_file.h"
#include "common/model_layout.h"

namespace spotps {

// How one spotps tensor is stored under Hugging Face's name.
struct HfGpt2Name {
  std::string hf_name;      // With the "transformer." prefix.
  bool transposed = false;  // Conv1D weight: [in, out] in the file.
};

// NOT_FOUND for a name that is not one of GptModel's.
absl::StatusOr<HfGpt2Name> HfGpt2NameFor(absl::string_view spotps_name);

// The model's weights (the whole flat space of `layout`) as tensors under
// Hugging Face names, Conv1D weights transposed, in layout order. Metadata
// is left to the caller.
absl::StatusOr<std::vector<SafetensorsTensor>> ToHfGpt2Tensors(const ModelLayout& layout,
                                                               absl::Span<const float> flat);

// The flat weights of `layout` from a file with Hugging Face GPT-2 names
// (with or without the "transformer." prefix, as GPT2LMHeadModel and
// GPT2Model save them). Skips the attention-mask buffers older files hold
// (h.N.attn.bias, h.N.attn.masked_bias) and a tied "lm_head.weight" (which
// must then equal wte). INVALID_ARGUMENT naming the tensor for a name the
// layout lacks, a tensor the layout needs and the file lacks, or a shape
// that differs from the layout's (transposed for Conv1D).
absl::StatusOr<std::vector<float>> FlatWeightsFromHfGpt2(const ModelLayout& layout,
                                                         const SafetensorsContents& file);

// The spotps GPT layout a Hugging Face GPT-2 file describes (vocabulary,
// context, width and depth read off wte, wpe and the h.N blocks), in
// GptModel's parameter order; for loading a file into shards that have no
// model yet. INVALID_ARGUMENT if the file is not a GPT-2 of that shape.
absl::StatusOr<ModelLayout> GptLayoutFromHfGpt2(const SafetensorsContents& file);

}  // namespace spotps

#endif  // SPOTPS_CLIENT_HF_GPT2_NAMES_H_
