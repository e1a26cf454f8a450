#include "client/hf_gpt2_names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/safetensors_file.h"
#include "common/tensor_codec.h"
#include "nlohmann/json.hpp"

#ifndef SPOTPS_GPT2_WRITER
#error "SPOTPS_GPT2_WRITER: path of tests/client/write_gpt2_safetensors.py"
#endif

namespace spotps {
namespace {

using ::testing::HasSubstr;

// GptModel's layout for a small config, in its parameter order.
ModelLayout SmallGptLayout(int64_t n_layer, int64_t c, int64_t vocab, int64_t context) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> t = {{"wte.weight", {vocab, c}},
                                                                 {"wpe.weight", {context, c}}};
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string b = absl::StrCat("blocks.", i, ".");
    t.push_back({b + "ln_1.weight", {c}});
    t.push_back({b + "ln_1.bias", {c}});
    t.push_back({b + "attn.qkv.weight", {3 * c, c}});
    t.push_back({b + "attn.qkv.bias", {3 * c}});
    t.push_back({b + "attn.proj.weight", {c, c}});
    t.push_back({b + "attn.proj.bias", {c}});
    t.push_back({b + "ln_2.weight", {c}});
    t.push_back({b + "ln_2.bias", {c}});
    t.push_back({b + "mlp.fc.weight", {4 * c, c}});
    t.push_back({b + "mlp.fc.bias", {4 * c}});
    t.push_back({b + "mlp.proj.weight", {c, 4 * c}});
    t.push_back({b + "mlp.proj.bias", {c}});
  }
  t.push_back({"ln_f.weight", {c}});
  t.push_back({"ln_f.bias", {c}});
  return *ModelLayout::Create(std::move(t));
}

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

TEST(HfGpt2Names, MapsEveryParameterAndOnlyThose) {
  absl::StatusOr<HfGpt2Name> n = HfGpt2NameFor("blocks.11.attn.qkv.weight");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->hf_name, "transformer.h.11.attn.c_attn.weight");
  EXPECT_TRUE(n->transposed);
  EXPECT_EQ(HfGpt2NameFor("blocks.0.mlp.proj.weight")->hf_name,
            "transformer.h.0.mlp.c_proj.weight");
  EXPECT_TRUE(HfGpt2NameFor("blocks.0.mlp.fc.weight")->transposed);
  EXPECT_FALSE(HfGpt2NameFor("blocks.0.mlp.fc.bias")->transposed);
  EXPECT_FALSE(HfGpt2NameFor("blocks.0.ln_2.weight")->transposed);
  EXPECT_EQ(HfGpt2NameFor("wte.weight")->hf_name, "transformer.wte.weight");
  EXPECT_EQ(HfGpt2NameFor("ln_f.bias")->hf_name, "transformer.ln_f.bias");
  for (const char* bad : {"lm_head.weight", "blocks.x.ln_1.weight", "blocks..ln_1.weight",
                          "blocks.0.attn.qkv", "h.0.ln_1.weight", ""}) {
    EXPECT_TRUE(absl::IsNotFound(HfGpt2NameFor(bad).status())) << bad;
  }
}

TEST(HfGpt2Names, ExportTransposesConv1DAndImportRestoresBitExact) {
  const ModelLayout layout = SmallGptLayout(2, 4, 7, 3);
  const std::vector<float> flat = Iota(layout.total_elements());
  absl::StatusOr<std::vector<SafetensorsTensor>> hf = ToHfGpt2Tensors(layout, flat);
  ASSERT_TRUE(hf.ok()) << hf.status();
  const TensorSlot* qkv = layout.Find("blocks.1.attn.qkv.weight");
  const SafetensorsTensor* c_attn = nullptr;
  for (const SafetensorsTensor& t : *hf) {
    if (t.name == "transformer.h.1.attn.c_attn.weight") c_attn = &t;
  }
  ASSERT_NE(c_attn, nullptr);
  EXPECT_EQ(c_attn->shape, (std::vector<int64_t>{4, 12}));
  for (int64_t in = 0; in < 4; ++in) {
    for (int64_t out = 0; out < 12; ++out) {
      ASSERT_EQ(c_attn->values[in * 12 + out], flat[qkv->flat_offset + out * 4 + in]);
    }
  }

  SafetensorsContents file;
  file.tensors = *std::move(hf);
  absl::StatusOr<std::string> bytes = SerializeSafetensors(file, SafetensorsDType::kF32);
  ASSERT_TRUE(bytes.ok());
  absl::StatusOr<SafetensorsContents> parsed = ParseSafetensors(*bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<ModelLayout> derived = GptLayoutFromHfGpt2(*parsed);
  ASSERT_TRUE(derived.ok()) << derived.status();
  EXPECT_EQ(derived->fingerprint(), layout.fingerprint()) << derived->Summary();
  absl::StatusOr<std::vector<float>> back = FlatWeightsFromHfGpt2(layout, *parsed);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(std::memcmp(back->data(), flat.data(), flat.size() * 4), 0);
}

// Runs the numpy writer; returns the file it wrote.
std::string WriteWithPython(const std::string& name, const std::string& flags) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  const std::string command =
      absl::StrCat("/usr/bin/python3 ", SPOTPS_GPT2_WRITER, " ", path, " ", flags);
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return path;
}

TEST(HfGpt2Names, LoadsAFileWrittenByPythonWithHuggingFaceNames) {
  // transformer.-prefixed names (GPT2LMHeadModel), the causal-mask buffers
  // and a tied lm_head, as real GPT-2 checkpoints have them.
  absl::StatusOr<SafetensorsContents> file =
      ReadSafetensorsFile(WriteWithPython("gpt2.safetensors",
                                          "--n_layer=2 --d_model=8 --vocab=11 --context=5 "
                                          "--mask_buffers --lm_head"));
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<ModelLayout> layout = GptLayoutFromHfGpt2(*file);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->fingerprint(), SmallGptLayout(2, 8, 11, 5).fingerprint());
  absl::StatusOr<std::vector<float>> flat = FlatWeightsFromHfGpt2(*layout, *file);
  ASSERT_TRUE(flat.ok()) << flat.status();

  // Every element where the writer's tag says it belongs.
  const nlohmann::json tags = nlohmann::json::parse(file->metadata.at("tags"));
  int checked = 0;
  for (const TensorSlot& slot : layout->tensors()) {
    const HfGpt2Name hf = *HfGpt2NameFor(slot.name);
    const float base = 10000.0f * tags.at(hf.hf_name).get<int>();
    for (int64_t i = 0; i < slot.num_elements; ++i) {
      int64_t file_index = i;
      if (hf.transposed) {  // spotps [out, in] element (o, x) is the file's (x, o).
        const int64_t out = i / slot.shape[1], in = i % slot.shape[1];
        file_index = in * slot.shape[0] + out;
      }
      ASSERT_EQ((*flat)[slot.flat_offset + i], base + float(file_index)) << slot.name << " " << i;
      ++checked;
    }
  }
  EXPECT_EQ(checked, layout->total_elements());

  // Without the prefix (GPT2Model, and the Hub's gpt2 file) and in BF16.
  absl::StatusOr<SafetensorsContents> bf16 = ReadSafetensorsFile(
      WriteWithPython("gpt2-bf16.safetensors",
                      "--n_layer=2 --d_model=8 --vocab=11 --context=5 --prefix= "
                      "--dtype=BF16"));
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  absl::StatusOr<std::vector<float>> narrow = FlatWeightsFromHfGpt2(*layout, *bf16);
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  for (size_t i = 0; i < flat->size(); ++i) {
    ASSERT_EQ((*narrow)[i], Bf16ToFloat(FloatToBf16((*flat)[i]))) << i;
  }
}

void ExpectRefused(const ModelLayout& layout, const SafetensorsContents& file,
                   const std::string& message) {
  absl::StatusOr<std::vector<float>> flat = FlatWeightsFromHfGpt2(layout, file);
  ASSERT_FALSE(flat.ok()) << "accepted; want: " << message;
  EXPECT_EQ(flat.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(flat.status().message()), HasSubstr(message));
}

TEST(HfGpt2Names, RefusesFilesThatDoNotFitTheModel) {
  const ModelLayout layout = SmallGptLayout(1, 4, 7, 3);
  SafetensorsContents good;
  good.tensors = *ToHfGpt2Tensors(layout, Iota(layout.total_elements()));
  auto edited = [&](auto edit) {
    SafetensorsContents f = good;
    edit(f);
    return f;
  };
  auto find = [](SafetensorsContents& f, const std::string& name) -> SafetensorsTensor& {
    for (SafetensorsTensor& t : f.tensors) {
      if (t.name == name) return t;
    }
    ADD_FAILURE() << "no " << name;
    return f.tensors[0];
  };
  ExpectRefused(layout, edited([&](SafetensorsContents& f) { f.tensors.pop_back(); }),
                "the file lacks 'transformer.ln_f.bias'");
  ExpectRefused(layout, edited([&](SafetensorsContents& f) {
                  find(f, "transformer.h.0.attn.c_attn.weight").shape = {12, 4};  // Not transposed.
                }),
                "'transformer.h.0.attn.c_attn.weight' has shape [12, 4], the model needs [4, 12]");
  ExpectRefused(layout, edited([&](SafetensorsContents& f) {
                  f.tensors.push_back({"transformer.h.1.ln_1.weight", {4}, {}, {1, 2, 3, 4}});
                }),
                "the model has no tensor for 'transformer.h.1.ln_1.weight'");
  ExpectRefused(layout, edited([&](SafetensorsContents& f) {
                  SafetensorsTensor t = find(f, "transformer.wpe.weight");
                  t.name = "wpe.weight";
                  f.tensors.push_back(t);
                }),
                "'wpe.weight' appears with and without the 'transformer.' prefix");
  ExpectRefused(layout, edited([&](SafetensorsContents& f) {
                  SafetensorsTensor t = find(f, "transformer.wte.weight");
                  t.name = "lm_head.weight";
                  t.values[3] += 1;
                  f.tensors.push_back(t);
                }),
                "'lm_head.weight' differs from the token embedding");
  EXPECT_FALSE(GptLayoutFromHfGpt2(edited([&](SafetensorsContents& f) {
                 f.tensors.erase(f.tensors.begin());  // No wte.
               })).ok());
}

}  // namespace
}  // namespace spotps
