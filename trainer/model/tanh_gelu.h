#ifndef SPOTPS_TRAINER_MODEL_TANH_GELU_H_
#define SPOTPS_TRAINER_MODEL_TANH_GELU_H_

#include <torch/torch.h>

namespace spotps {

// GPT-2's activation, GELU with the tanh approximation,
//   0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))),
// as an autograd op: the same values and first derivatives as
// torch::gelu(x, "tanh"), each computed in FP32 and rounded once to x's dtype.
//
// Why not torch::gelu: LibTorch 1.13's CPU kernel (Debian builds it for AVX2
// at most) takes 38-64 ms forward and ~60 ms backward on one thread for a
// BF16 [4096, 1536] activation, ~0.5 s of a 1.7 s `small` training step;
// oneDNN's JIT eltwise kernels take 4 and 5 ms. A contiguous FP32 or BF16
// tensor on a CPU where oneDNN has such a kernel takes that path; anything
// else (other dtypes, strided views, oneDNN's reference kernels) falls back
// to torch::gelu. First derivatives only: backward with create_graph fails.
torch::Tensor TanhGelu(const torch::Tensor& x);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_MODEL_TANH_GELU_H_
