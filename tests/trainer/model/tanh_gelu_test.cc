#include "trainer/model/tanh_gelu.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace spotps {
namespace {

// Inputs spanning GELU's curved middle and both tails (|x| up to ~16).
torch::Tensor Inputs(torch::IntArrayRef shape, torch::ScalarType dtype, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return (torch::randn(shape, generator) * 4.0).to(dtype);
}

struct ValueAndGrad {
  torch::Tensor value, grad;
};

template <typename Gelu>
ValueAndGrad Run(Gelu gelu, const torch::Tensor& x, const torch::Tensor& upstream) {
  torch::Tensor leaf = x.detach().clone();
  leaf.set_requires_grad(true);
  torch::Tensor y = gelu(leaf);
  y.backward(upstream);
  return {y.detach(), leaf.grad()};
}

// The formula in float64 on the same (already rounded) inputs.
ValueAndGrad Exact(const torch::Tensor& x, const torch::Tensor& upstream) {
  return Run([](const torch::Tensor& t) { return torch::gelu(t, "tanh"); },
             x.to(torch::kDouble), upstream.to(torch::kDouble));
}

// Each element is within `rounding` of the exact value, relative to it,
// plus float arithmetic's slack relative to `scale`: GELU cancels (1 +
// tanh) in its negative tail, where the result is tiny next to x.
void ExpectWithin(const torch::Tensor& got, const torch::Tensor& exact, const torch::Tensor& scale,
                  double rounding) {
  ASSERT_EQ(got.sizes(), exact.sizes());
  constexpr double kFloatSlack = 1e-5;
  const torch::Tensor error = (got.to(torch::kDouble) - exact).abs();
  const torch::Tensor allowed = exact.abs() * rounding + scale.to(torch::kDouble) * kFloatSlack;
  const torch::Tensor worst = (error / allowed).max();
  EXPECT_LE(worst.item<double>(), 1.0) << "max error " << error.max().item<double>();
}

void ExpectMatchesTheFormula(const torch::Tensor& x, double rounding) {
  const torch::Tensor upstream = Inputs(x.sizes(), x.scalar_type(), /*seed=*/9) / 4.0;
  const ValueAndGrad got = Run(TanhGelu, x, upstream);
  const ValueAndGrad exact = Exact(x, upstream);
  EXPECT_EQ(got.value.scalar_type(), x.scalar_type());
  EXPECT_EQ(got.grad.scalar_type(), x.scalar_type());
  const torch::Tensor magnitude = x.to(torch::kDouble).abs() + 1.0;
  ExpectWithin(got.value, exact.value, magnitude, rounding);
  ExpectWithin(got.grad, exact.grad, upstream.to(torch::kDouble).abs() * magnitude, rounding);
}

// An MLP activation's shape in the `small` model, [batch * seq, 4 * d_model]
// scaled down, large enough for oneDNN's path.
constexpr int64_t kRows = 512, kCols = 1536;

TEST(TanhGeluTest, Fp32MatchesTheFormulaToFloatPrecision) {
  ExpectMatchesTheFormula(Inputs({kRows, kCols}, torch::kFloat, 1), 1e-6);
}

// Computed in FP32 and rounded once: within half a BF16 unit (2^-8
// relative) of the exact value, forward and backward. LibTorch's own BF16
// backward rounds intermediates and misses this bound.
TEST(TanhGeluTest, Bf16IsTheExactValueRoundedOnce) {
  ExpectMatchesTheFormula(Inputs({kRows, kCols}, torch::kBFloat16, 2), std::ldexp(1.0, -8) * 1.01);
}

// Strided views take LibTorch's kernel; a 3-element tensor oneDNN's.
TEST(TanhGeluTest, StridedTinyAndEmptyInputsGiveTheFormulasValues) {
  const torch::Tensor strided = Inputs({kCols, kRows}, torch::kFloat, 3).t();
  ASSERT_FALSE(strided.is_contiguous());
  ExpectMatchesTheFormula(strided, 1e-6);
  ExpectMatchesTheFormula(Inputs({3}, torch::kFloat, 4), 1e-6);
  const torch::Tensor empty = torch::empty({0, 8});
  EXPECT_EQ(TanhGelu(empty).sizes(), empty.sizes());
}

TEST(TanhGeluTest, NonFiniteInputsGiveWhatLibTorchGives) {
  torch::Tensor x = torch::zeros({4096});
  x[0] = std::numeric_limits<float>::quiet_NaN();
  x[1] = std::numeric_limits<float>::infinity();
  x[2] = -std::numeric_limits<float>::infinity();
  const torch::Tensor y = TanhGelu(x);
  EXPECT_TRUE(std::isnan(y[0].item<float>()));
  EXPECT_EQ(y[1].item<float>(), std::numeric_limits<float>::infinity());
  // -inf * (1 + tanh(-inf)) is NaN in the formula, here as in LibTorch.
  EXPECT_TRUE(torch::allclose(y, torch::gelu(x, "tanh"), 0, 0, /*equal_nan=*/true));
}

TEST(TanhGeluTest, SecondDerivativesAreRefused) {
  torch::Tensor x = Inputs({kRows, kCols}, torch::kFloat, 5);
  x.set_requires_grad(true);
  const torch::Tensor y = TanhGelu(x).sum();
  EXPECT_THROW(torch::autograd::grad({y}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true),
               c10::Error);
}

}  // namespace
}  // namespace spotps
