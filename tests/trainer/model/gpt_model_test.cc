#include "trainer/model/gpt_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace spotps {
namespace {

GptConfig TinyConfig() { return *GptConfigFromPreset("tiny"); }

torch::Tensor RandomTokens(int64_t batch, int64_t length, int64_t vocab, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randint(0, vocab, {batch, length}, generator, torch::kLong);
}

torch::Tensor Logits(GptModel& model, const torch::Tensor& tokens, ComputeDType dtype) {
  torch::NoGradGuard no_grad;
  ComputePrecisionScope precision(dtype);
  return model->forward(tokens);
}

std::map<std::string, torch::Tensor> Gradients(GptModel& model, const torch::Tensor& inputs,
                                               const torch::Tensor& targets, ComputeDType dtype) {
  model->zero_grad();
  absl::StatusOr<torch::Tensor> loss = ComputeLoss(model, inputs, targets, dtype);
  EXPECT_TRUE(loss.ok()) << loss.status();
  loss->backward();
  std::map<std::string, torch::Tensor> gradients;
  for (const auto& parameter : model->named_parameters()) {
    gradients[parameter.key()] = parameter.value().grad().clone();
  }
  return gradients;
}

double Cosine(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor x = a.to(torch::kDouble).flatten();
  const torch::Tensor y = b.to(torch::kDouble).flatten();
  return (x.dot(y) / (x.norm() * y.norm())).item<double>();
}

// Edits one token and checks that only logits from that position on move.
void ExpectCausal(ComputeDType dtype) {
  using torch::indexing::Slice;
  GptModel model(TinyConfig(), /*seed=*/1);
  const int64_t length = 48, changed = 30;
  const torch::Tensor tokens = RandomTokens(2, length, 256, /*seed=*/7);
  torch::Tensor edited = tokens.clone();
  edited.index_put_({Slice(), changed}, (tokens.index({Slice(), changed}) + 1) % 256);

  const torch::Tensor original = Logits(model, tokens, dtype);
  const torch::Tensor after_edit = Logits(model, edited, dtype);
  EXPECT_TRUE(torch::equal(original.index({Slice(), Slice(0, changed)}),
                           after_edit.index({Slice(), Slice(0, changed)})));
  // The edit must be visible from its own position on, or the comparison
  // above proves nothing.
  EXPECT_FALSE(torch::allclose(original.index({Slice(), Slice(changed)}),
                               after_edit.index({Slice(), Slice(changed)})));
}

TEST(GptModelTest, CausalInFp32) { ExpectCausal(ComputeDType::kFP32); }

TEST(GptModelTest, CausalInBf16) { ExpectCausal(ComputeDType::kBF16); }

TEST(GptModelTest, Bf16GradientsAgreeWithFp32) {
  GptModel model(TinyConfig(), /*seed=*/2);
  const torch::Tensor tokens = RandomTokens(4, 65, 256, /*seed=*/3);
  const torch::Tensor inputs = tokens.slice(1, 0, 64);
  const torch::Tensor targets = tokens.slice(1, 1, 65);

  auto fp32 = Gradients(model, inputs, targets, ComputeDType::kFP32);
  auto bf16 = Gradients(model, inputs, targets, ComputeDType::kBF16);
  bool any_difference = false;
  for (const auto& [name, gradient] : fp32) {
    EXPECT_GE(Cosine(gradient, bf16.at(name)), 0.99) << name;
    any_difference |= !torch::equal(gradient, bf16.at(name));
  }
  // Identical gradients would mean BF16 mode silently ran in FP32.
  EXPECT_TRUE(any_difference);
}

TEST(GptModelTest, LogitsAreFp32WithVocabularyWidth) {
  GptModel model(TinyConfig(), /*seed=*/1);
  const torch::Tensor tokens = RandomTokens(3, 16, 256, /*seed=*/1);
  for (ComputeDType dtype : {ComputeDType::kFP32, ComputeDType::kBF16}) {
    const torch::Tensor logits = Logits(model, tokens, dtype);
    EXPECT_EQ(logits.scalar_type(), torch::kFloat);
    EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 16, 256}));
  }
}

TEST(GptModelTest, InitialLossIsNearUniformAndBf16Matches) {
  GptModel model(TinyConfig(), /*seed=*/4);
  const torch::Tensor tokens = RandomTokens(4, 65, 256, /*seed=*/5);
  const torch::Tensor inputs = tokens.slice(1, 0, 64);
  const torch::Tensor targets = tokens.slice(1, 1, 65);
  torch::NoGradGuard no_grad;
  const double fp32 = ComputeLoss(model, inputs, targets, ComputeDType::kFP32)->item<double>();
  const double bf16 = ComputeLoss(model, inputs, targets, ComputeDType::kBF16)->item<double>();
  EXPECT_NEAR(fp32, std::log(256.0), 0.15);
  EXPECT_NEAR(bf16, fp32, 0.02);
}

TEST(GptModelTest, SameSeedGivesIdenticalParameters) {
  at::set_num_threads(1);
  GptModel a(TinyConfig(), /*seed=*/11);
  // Workers may run with any thread count; initialization must not care.
  at::set_num_threads(2);
  GptModel b(TinyConfig(), /*seed=*/11);
  GptModel c(TinyConfig(), /*seed=*/12);
  const auto a_params = a->named_parameters();
  const auto b_params = b->named_parameters();
  const auto c_params = c->named_parameters();
  ASSERT_EQ(a_params.size(), b_params.size());
  bool differs_from_other_seed = false;
  for (size_t i = 0; i < a_params.size(); ++i) {
    EXPECT_EQ(a_params[i].key(), b_params[i].key());
    EXPECT_TRUE(torch::equal(a_params[i].value(), b_params[i].value())) << a_params[i].key();
    differs_from_other_seed |= !torch::equal(a_params[i].value(), c_params[i].value());
  }
  EXPECT_TRUE(differs_from_other_seed);
}

TEST(GptModelTest, ParameterNamesAreStableAndOrdered) {
  GptModel model(TinyConfig(), /*seed=*/0);
  std::vector<std::string> names;
  for (const auto& parameter : model->named_parameters()) {
    names.push_back(parameter.key());
  }
  const int64_t per_block = 12;
  ASSERT_EQ(names.size(), size_t(2 + per_block * TinyConfig().n_layer + 2));
  const std::vector<std::string> expected_head = {"wte.weight",
                                                  "wpe.weight",
                                                  "blocks.0.ln_1.weight",
                                                  "blocks.0.ln_1.bias",
                                                  "blocks.0.attn.qkv.weight",
                                                  "blocks.0.attn.qkv.bias",
                                                  "blocks.0.attn.proj.weight",
                                                  "blocks.0.attn.proj.bias",
                                                  "blocks.0.ln_2.weight",
                                                  "blocks.0.ln_2.bias",
                                                  "blocks.0.mlp.fc.weight",
                                                  "blocks.0.mlp.fc.bias",
                                                  "blocks.0.mlp.proj.weight",
                                                  "blocks.0.mlp.proj.bias",
                                                  "blocks.1.ln_1.weight"};
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + expected_head.size()),
            expected_head);
  EXPECT_EQ(names[names.size() - 2], "ln_f.weight");
  EXPECT_EQ(names.back(), "ln_f.bias");
}

TEST(GptModelTest, AllocatedParameterCountMatchesConfigCount) {
  for (absl::string_view preset : {"tiny", "small"}) {
    const GptConfig config = *GptConfigFromPreset(preset);
    GptModel model(config, /*seed=*/0);
    int64_t count = 0;
    for (const torch::Tensor& parameter : model->parameters()) {
      count += parameter.numel();
    }
    EXPECT_EQ(count, GptParameterCount(config)) << preset;
  }
}

TEST(GptModelTest, OutputHeadIsTiedToTokenEmbedding) {
  GptModel model(TinyConfig(), /*seed=*/0);
  const GptConfig config = TinyConfig();
  for (const auto& parameter : model->named_parameters()) {
    if (parameter.key() == "wte.weight") continue;
    EXPECT_NE(parameter.value().sizes(), (std::vector<int64_t>{config.vocab_size, config.d_model}))
        << parameter.key() << " looks like an untied output head";
  }
  // Token 200 never occurs in the batch, so only the head can give its
  // embedding row a gradient.
  const torch::Tensor inputs = torch::ones({1, 8}, torch::kLong);
  const torch::Tensor targets = torch::full({1, 8}, 2, torch::kLong);
  ComputeLoss(model, inputs, targets, ComputeDType::kFP32)->backward();
  const torch::Tensor wte_grad = model->named_parameters()["wte.weight"].grad();
  EXPECT_GT(wte_grad[200].abs().sum().item<double>(), 0.0);
}

TEST(GptModelTest, InitializationFollowsGpt2Scheme) {
  GptModel model(TinyConfig(), /*seed=*/3);
  auto params = model->named_parameters();
  const double residual_std = 0.02 / std::sqrt(2.0 * TinyConfig().n_layer);
  EXPECT_NEAR(params["blocks.0.attn.qkv.weight"].std().item<double>(), 0.02, 0.001);
  EXPECT_NEAR(params["blocks.1.mlp.proj.weight"].std().item<double>(), residual_std, 0.0005);
  EXPECT_TRUE(torch::equal(params["ln_f.weight"], torch::ones({TinyConfig().d_model})));
  EXPECT_EQ(params["blocks.2.mlp.fc.bias"].abs().sum().item<double>(), 0.0);
}

TEST(GptModelTest, BadInputsBecomeInvalidArgument) {
  GptModel model(TinyConfig(), /*seed=*/0);
  const torch::Tensor targets = torch::zeros({1, 4}, torch::kLong);
  const auto loss_code = [&](const torch::Tensor& inputs, const torch::Tensor& targets) {
    return ComputeLoss(model, inputs, targets, ComputeDType::kFP32).status().code();
  };
  EXPECT_EQ(loss_code(torch::full({1, 4}, 256, torch::kLong), targets),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loss_code(torch::zeros({1, 4}, torch::kInt), targets),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loss_code(torch::zeros({1, 129}, torch::kLong), torch::zeros({1, 129}, torch::kLong)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loss_code(torch::zeros({1, 4}, torch::kLong), torch::zeros({1, 5}, torch::kLong)),
            absl::StatusCode::kInvalidArgument);
}

TEST(GptModelTest, CreateRejectsInvalidConfig) {
  GptConfig config = TinyConfig();
  config.n_head = 3;
  absl::StatusOr<GptModel> model = CreateGptModel(config, /*seed=*/0);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CreateGptModel(TinyConfig(), /*seed=*/0).ok());
}

}  // namespace
}  // namespace spotps
