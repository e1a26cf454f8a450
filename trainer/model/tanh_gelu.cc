#include "trainer/model/tanh_gelu.h"

#include <optional>
#include <string>
#include <unordered_map>

#include "absl/strings/match.h"
#include "common/onednn_engine.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace spotps {
namespace {

using dnnl::algorithm;
using dnnl::eltwise_backward;
using dnnl::eltwise_forward;
using dnnl::memory;

std::optional<memory::data_type> OneDnnType(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat:
      return memory::data_type::f32;
    case torch::kBFloat16:
      return memory::data_type::bf16;
    default:
      return std::nullopt;
  }
}

// oneDNN's reference kernels are scalar C++, slower than LibTorch's.
bool IsJitKernel(const dnnl::primitive_desc_base& pd) {
  return !absl::StartsWith(pd.impl_info_str(), "ref");
}

struct GeluKernels {
  eltwise_forward::primitive_desc forward;
  eltwise_backward::primitive_desc backward;
};

// The primitive descriptors for x's dtype and length, or nullopt where
// oneDNN has no JIT kernel for them (or x is not a dense CPU tensor).
// Creating them takes ~40 us against the kernels' milliseconds, and the
// primitives made from them come from oneDNN's primitive cache, so each
// call finds them again rather than keep a cache of its own.
std::optional<GeluKernels> FindKernels(const torch::Tensor& x) {
  const std::optional<memory::data_type> type = OneDnnType(x);
  if (!type || !x.device().is_cpu() || !x.is_contiguous() || x.numel() == 0) return std::nullopt;
  // Elementwise: the tensor's shape does not matter, only its length.
  const memory::desc flat({x.numel()}, *type, memory::format_tag::a);
  const dnnl::engine& engine = OneDnnCpuEngine();
  GeluKernels k;
  k.forward = eltwise_forward::primitive_desc(
      eltwise_forward::desc(dnnl::prop_kind::forward_training, algorithm::eltwise_gelu_tanh, flat),
      engine);
  k.backward = eltwise_backward::primitive_desc(
      eltwise_backward::desc(algorithm::eltwise_gelu_tanh, flat, flat), engine, k.forward);
  if (!IsJitKernel(k.forward) || !IsJitKernel(k.backward)) return std::nullopt;
  return k;
}

void Execute(const dnnl::primitive& primitive, const memory::desc& desc,
             const std::unordered_map<int, const torch::Tensor*>& tensors) {
  std::unordered_map<int, memory> args;
  for (const auto& [arg, tensor] : tensors) {
    args.emplace(arg, memory(desc, OneDnnCpuEngine(), tensor->data_ptr()));
  }
  dnnl::stream stream(OneDnnCpuEngine());
  primitive.execute(stream, args);
  stream.wait();
}

class TanhGeluFunction : public torch::autograd::Function<TanhGeluFunction> {
 public:
  // `kernels` are the ones TanhGelu found for x: not looked up twice.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const GeluKernels& kernels) {
    ctx->save_for_backward({x});
    torch::Tensor y = torch::empty_like(x);
    Execute(eltwise_forward(kernels.forward), kernels.forward.src_desc(),
            {{DNNL_ARG_SRC, &x}, {DNNL_ARG_DST, &y}});
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    TORCH_CHECK(!torch::GradMode::is_enabled(),
                "TanhGelu has first derivatives only (backward with create_graph=true)");
    const torch::Tensor x = ctx->get_saved_variables()[0];
    const torch::Tensor grad = grads[0].to(x.scalar_type()).contiguous();
    const std::optional<GeluKernels> kernels = FindKernels(x);
    TORCH_INTERNAL_ASSERT(kernels.has_value(), "TanhGeluFunction lost its kernel");
    torch::Tensor grad_x = torch::empty_like(x);
    Execute(eltwise_backward(kernels->backward), kernels->backward.diff_src_desc(),
            {{DNNL_ARG_SRC, &x}, {DNNL_ARG_DIFF_DST, &grad}, {DNNL_ARG_DIFF_SRC, &grad_x}});
    return {grad_x, torch::Tensor()};  // None for `kernels`.
  }
};

}  // namespace

torch::Tensor TanhGelu(const torch::Tensor& x) {
  const std::optional<GeluKernels> kernels = FindKernels(x);
  if (!kernels.has_value()) return torch::gelu(x, "tanh");
  return TanhGeluFunction::apply(x, *kernels);
}

}  // namespace spotps
