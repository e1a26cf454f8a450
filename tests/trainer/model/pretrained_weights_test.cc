#include "trainer/model/pretrained_weights.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "trainer/model/builtin_model.h"
#include "client/hf_gpt2_names.h"
#include "client/safetensors_file.h"
#include "trainer/model/gpt_config.h"
#include "trainer/model/parameter_binding.h"

namespace spotps {
namespace {

using ::testing::HasSubstr;

// Hugging Face's GPT-2 small (the "gpt2" checkpoint), from its config:
// n_embd 768, n_layer 12, n_positions 1024, vocab_size 50257; Conv1D
// weights [in, out].
std::map<std::string, std::vector<int64_t>> HuggingFaceGpt2SmallShapes() {
  std::map<std::string, std::vector<int64_t>> s = {{"transformer.wte.weight", {50257, 768}},
                                                   {"transformer.wpe.weight", {1024, 768}},
                                                   {"transformer.ln_f.weight", {768}},
                                                   {"transformer.ln_f.bias", {768}}};
  for (int i = 0; i < 12; ++i) {
    const std::string h = absl::StrCat("transformer.h.", i, ".");
    s[h + "ln_1.weight"] = s[h + "ln_1.bias"] = s[h + "ln_2.weight"] = s[h + "ln_2.bias"] = {768};
    s[h + "attn.c_attn.weight"] = {768, 2304};
    s[h + "attn.c_attn.bias"] = {2304};
    s[h + "attn.c_proj.weight"] = {768, 768};
    s[h + "attn.c_proj.bias"] = {768};
    s[h + "mlp.c_fc.weight"] = {768, 3072};
    s[h + "mlp.c_fc.bias"] = {3072};
    s[h + "mlp.c_proj.weight"] = {3072, 768};
    s[h + "mlp.c_proj.bias"] = {768};
  }
  return s;
}

TEST(PretrainedWeights, Gpt2PresetHasEveryTensorOfHuggingFaceGpt2InItsShape) {
  absl::StatusOr<GptModel> model = CreateGptModel(*GptConfigFromPreset("gpt2-124m"), 1);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<ParameterBinding> binding = ParameterBinding::Create(**model);
  ASSERT_TRUE(binding.ok());
  std::map<std::string, std::vector<int64_t>> want = HuggingFaceGpt2SmallShapes();
  for (const TensorSlot& slot : binding->layout().tensors()) {
    absl::StatusOr<HfGpt2Name> hf = HfGpt2NameFor(slot.name);
    ASSERT_TRUE(hf.ok()) << hf.status();
    std::vector<int64_t> stored = slot.shape;
    if (hf->transposed) std::swap(stored[0], stored[1]);
    ASSERT_EQ(want.count(hf->hf_name), 1u) << slot.name << " -> " << hf->hf_name;
    EXPECT_EQ(want[hf->hf_name], stored) << hf->hf_name;
    want.erase(hf->hf_name);
  }
  EXPECT_TRUE(want.empty()) << want.size() << " GPT-2 tensors the preset lacks, e.g. "
                            << want.begin()->first;
}

class PretrainedWeightsFile : public ::testing::Test {
 protected:
  // A tiny model's weights exported from another seed, as a file.
  void SetUp() override {
    GptModel source = *CreateGptModel(*GptConfigFromPreset("tiny"), 99);
    ParameterBinding binding = *ParameterBinding::Create(*source);
    source_flat_ = binding.FlattenWeights();
    file_.tensors = *ToHfGpt2Tensors(binding.layout(), source_flat_);
    path_ = absl::StrCat(::testing::TempDir(), "/tiny.safetensors");
    ASSERT_TRUE(WriteSafetensorsFile(path_, file_, SafetensorsDType::kF32).ok());
  }

  std::vector<float> source_flat_;
  SafetensorsContents file_;
  std::string path_;
};

TEST_F(PretrainedWeightsFile, LoadsIntoTheModelBitExactAndChangesItsLogits) {
  GptModel model = *CreateGptModel(*GptConfigFromPreset("tiny"), 1);
  const std::vector<float> before = (*ParameterBinding::Create(*model)).FlattenWeights();
  ASSERT_NE(before, source_flat_);
  const std::vector<int64_t> tokens = {1, 2, 3, 250};
  BuiltinGptModel wrapped(model, "tiny");
  auto logits_before = LogitsFor(wrapped, tokens, ComputeDType::kFP32);
  ASSERT_TRUE(logits_before.ok());
  ASSERT_TRUE(LoadPretrainedWeights(model, path_).ok());
  const std::vector<float> after = (*ParameterBinding::Create(*model)).FlattenWeights();
  ASSERT_EQ(after.size(), source_flat_.size());
  EXPECT_EQ(std::memcmp(after.data(), source_flat_.data(), after.size() * 4), 0);

  GptModel source = *CreateGptModel(*GptConfigFromPreset("tiny"), 99);
  BuiltinGptModel wrapped_source(source, "tiny");
  auto logits = LogitsFor(wrapped, tokens, ComputeDType::kFP32);
  auto logits_source = LogitsFor(wrapped_source, tokens, ComputeDType::kFP32);
  ASSERT_TRUE(logits.ok() && logits_source.ok());
  ASSERT_EQ(logits->size(), tokens.size());
  ASSERT_EQ((*logits)[0].size(), 256u);
  EXPECT_EQ(*logits, *logits_source);
  EXPECT_NE(*logits, *logits_before);
}

TEST_F(PretrainedWeightsFile, RefusesAnotherShapeAndLeavesTheModelAlone) {
  GptConfig wider = *GptConfigFromPreset("tiny");
  wider.n_layer = 3;  // The file has 4 blocks.
  GptModel model = *CreateGptModel(wider, 1);
  const std::vector<float> before = (*ParameterBinding::Create(*model)).FlattenWeights();
  absl::Status s = LoadPretrainedWeights(model, path_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("tiny.safetensors"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("transformer.h.3."));
  EXPECT_EQ((*ParameterBinding::Create(*model)).FlattenWeights(), before);

  s = LoadPretrainedWeights(model, path_ + ".missing");
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace spotps
