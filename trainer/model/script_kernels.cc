#include "trainer/model/script_kernels.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/subgraph_matcher.h>
#include <torch/csrc/jit/passes/subgraph_rewrite.h>
#include <torch/library.h>

#include "trainer/model/tanh_gelu.h"

// An operator a TorchScript graph can call. CompositeImplicitAutograd: its
// kernel is TanhGelu's autograd function, so autograd records it as it
// does in the built-in model.
TORCH_LIBRARY(spotps, m) {
  m.def("tanh_gelu(Tensor self) -> Tensor");
  m.impl("tanh_gelu", c10::DispatchKey::CompositeImplicitAutograd,
         [](const at::Tensor& x) { return spotps::TanhGelu(x); });
}

namespace spotps {
namespace {

constexpr char kGelu[] = R"IR(
graph(%x, %approximate):
  %y = aten::gelu(%x, %approximate)
  return (%y))IR";
constexpr char kOneDnnGelu[] = R"IR(
graph(%x, %approximate):
  %y = spotps::tanh_gelu(%x)
  return (%y))IR";

// Only GELU with the tanh approximation, given as a constant.
bool IsTanhApproximation(const torch::jit::Match& match,
                         const std::unordered_map<std::string, torch::jit::Value*>& vmap) {
  const torch::jit::Value* approximate = match.values_map.at(vmap.at("approximate"));
  const c10::optional<c10::IValue> value = torch::jit::toIValue(approximate);
  return value.has_value() && value->isString() && value->toStringRef() == "tanh";
}

int CountKind(const torch::jit::Graph& graph, const char* kind) {
  int n = 0;
  for (const torch::jit::Node* node : graph.nodes()) {
    n += node->kind() == c10::Symbol::fromQualString(kind) ? 1 : 0;
  }
  return n;
}

}  // namespace

int UseSpotpsKernels(torch::jit::Module& module) {
  torch::jit::SubgraphRewriter rewriter;
  rewriter.RegisterRewritePattern(kGelu, kOneDnnGelu);
  int replaced = 0;
  for (torch::jit::Module m : module.modules()) {
    for (torch::jit::Method method : m.get_methods()) {
      std::shared_ptr<torch::jit::Graph> graph = method.graph();
      const int before = CountKind(*graph, "spotps::tanh_gelu");
      rewriter.runOnGraph(graph, IsTanhApproximation);
      replaced += CountKind(*graph, "spotps::tanh_gelu") - before;
    }
  }
  return replaced;
}

}  // namespace spotps
