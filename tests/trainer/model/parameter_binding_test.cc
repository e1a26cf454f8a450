// A model's layout through a real shard process and back.
#include "trainer/model/parameter_binding.h"

#include <gtest/gtest.h>

#include "client/cluster.h"
#include "tests/support/child_process.h"
#include "trainer/model/gpt_config.h"
#include "trainer/model/gpt_model.h"

namespace spotps {
namespace {

GptModel Tiny(uint64_t seed) { return *CreateGptModel(*GptConfigFromPreset("tiny"), seed); }

TEST(ParameterBindingTest, LayoutAndWeightsRoundTripThroughTheParameterServer) {
  testing::TempDir dir;
  auto shards = testing::LocalShardCluster::Start(2, {"--optimizer=sgd", "--lr=0.5"}, dir.path());
  ASSERT_TRUE(shards.ok()) << shards.status();

  GptModel source = Tiny(1);
  auto binding = ParameterBinding::Create(*source);
  ASSERT_TRUE(binding.ok()) << binding.status();
  size_t params = 0;
  for (const auto& p : source->named_parameters()) {
    const TensorSlot* slot = binding->layout().Find(p.key());
    ASSERT_NE(slot, nullptr) << p.key();
    EXPECT_EQ(slot->shape, p.value().sizes().vec());
    ++params;
  }
  EXPECT_EQ(binding->layout().tensors().size(), params);  // One PS tensor per parameter.
  auto writer = Cluster::Connect((*shards)->addresses());
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Init(binding->layout(), binding->FlattenWeights())->everywhere());

  // A reader with a differently seeded model of the same shape gets the
  // source's weights exactly (FP32 pull).
  auto reader = Cluster::Connect((*shards)->addresses());
  ASSERT_TRUE((*reader)->FetchLayout().ok());
  GptModel copy = Tiny(2);
  auto copy_binding = ParameterBinding::Create(*copy);
  ASSERT_TRUE(copy_binding->CheckSameModel((*reader)->layout()).ok());
  WeightSnapshot weights;
  ASSERT_TRUE((*reader)->Pull(v1::DTYPE_FP32, &weights).ok());
  copy_binding->LoadWeights(weights.values);
  auto a = source->named_parameters();
  auto b = copy->named_parameters();
  for (const auto& p : a) {
    EXPECT_TRUE(torch::equal(p.value(), b[p.key()])) << p.key();
  }

  // Gradients travel the same way: a push of the model's gradient moves
  // every weight by exactly lr * g.
  copy->zero_grad();
  for (auto& p : copy->parameters()) p.mutable_grad() = torch::full_like(p, 0.25);
  std::vector<float> grad(copy_binding->layout().total_elements());
  copy_binding->GatherGradients(absl::MakeSpan(grad));
  ASSERT_TRUE((*reader)->Push(grad, weights.versions, v1::DTYPE_BF16).ok());
  auto wte = (*reader)->PullTensor("wte.weight", v1::DTYPE_FP32);
  ASSERT_TRUE(wte.ok()) << wte.status();
  const torch::Tensor expected = source->named_parameters()["wte.weight"].flatten() - 0.125;
  const torch::Tensor got = torch::from_blob(wte->data(), {static_cast<int64_t>(wte->size())});
  EXPECT_TRUE(torch::allclose(got, expected, 0, 1e-7));
}

TEST(ParameterBindingTest, ADifferentModelIsRefusedWithAClearMessage) {
  GptModel tiny = Tiny(1);
  GptConfig wider = *GptConfigFromPreset("tiny");
  wider.d_model = 192;
  wider.n_head = 4;
  GptModel other = *CreateGptModel(wider, 1);
  auto a = ParameterBinding::Create(*tiny);
  auto b = ParameterBinding::Create(*other);
  absl::Status s = a->CheckSameModel(b->layout());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--model"), absl::string_view::npos) << s;
}

// BindTo makes the parameters views of a flat buffer: what is written there
// is what the model computes with, with no copy, and autograd still fills
// the parameters' gradients. Binding another buffer switches the weights.
TEST(ParameterBindingTest, BoundParametersReadTheFlatBufferInPlace) {
  GptModel model = Tiny(1);
  GptModel other = Tiny(2);
  auto binding = ParameterBinding::Create(*model);
  auto other_binding = ParameterBinding::Create(*other);
  ASSERT_TRUE(binding.ok() && other_binding.ok());
  std::vector<float> first = binding->FlattenWeights();
  std::vector<float> second = other_binding->FlattenWeights();
  const torch::Tensor tokens = torch::arange(16, torch::kLong).view({1, 16});
  const torch::Tensor want_first = model->forward(tokens).detach().clone();
  const torch::Tensor want_second = other->forward(tokens).detach().clone();

  binding->BindTo(absl::MakeSpan(second));
  EXPECT_TRUE(torch::equal(model->forward(tokens), want_second));
  EXPECT_EQ(model->named_parameters()["wte.weight"].data_ptr<float>(), second.data());
  binding->BindTo(absl::MakeSpan(first));
  EXPECT_TRUE(torch::equal(model->forward(tokens), want_first));
  first[0] += 1.0f;  // wte.weight[0][0]: token 0's embedding.
  EXPECT_FALSE(torch::equal(model->forward(tokens), want_first));

  model->forward(tokens).sum().backward();
  std::vector<float> gradient(binding->layout().total_elements(), -1.0f);
  binding->GatherGradients(absl::MakeSpan(gradient));
  EXPECT_NE(gradient[0], 0.0f);
  EXPECT_NE(gradient[0], -1.0f);
}

}  // namespace
}  // namespace spotps
