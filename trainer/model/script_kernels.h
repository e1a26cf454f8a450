// ScriptKernels: the kernels that make the built-in GPT fast, given to
// TorchScript models too, by rewriting their graphs when they are loaded.
//
// Today: GPT-2's tanh GELU. LibTorch 1.13's aten::gelu(x, "tanh") is slow on
// CPUs (tanh_gelu.h says how slow); a scripted model's call to it becomes a
// call to spotps::tanh_gelu, an operator on oneDNN's kernels with the same
// values and gradients.
#ifndef SPOTPS_TRAINER_MODEL_SCRIPT_KERNELS_H_
#define SPOTPS_TRAINER_MODEL_SCRIPT_KERNELS_H_

#include <torch/script.h>

namespace spotps {

// Rewrites every method of `module` and of its submodules in place, before
// they first run; returns how many calls it replaced.
int UseSpotpsKernels(torch::jit::Module& module);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_MODEL_SCRIPT_KERNELS_H_
