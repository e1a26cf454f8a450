// ParameterBinding: the bridge between a LibTorch module's named parameters
// and the parameter server's flat FP32 space.
#ifndef SPOTPS_TRAINER_MODEL_PARAMETER_BINDING_H_
#define SPOTPS_TRAINER_MODEL_PARAMETER_BINDING_H_

#include <torch/torch.h>

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model_layout.h"
#include "trainer/model/trainable_model.h"

namespace spotps {

// Owns the layout derived from a model's trained parameters (one PS tensor
// per parameter, in the model's order) and references to the parameters.
// Promises: Load and Gather move whole flat buffers in one pass and never
// resize a parameter; the model must outlive the binding.
class ParameterBinding {
 public:
  static absl::StatusOr<ParameterBinding> Create(TrainableModel& model);
  static absl::StatusOr<ParameterBinding> Create(torch::nn::Module& module);

  const ModelLayout& layout() const { return layout_; }

  // INVALID_ARGUMENT, naming the first difference, if the cluster holds a
  // different model than this one (another preset, dimension flag or file):
  // this trainer was started with the wrong --model.
  absl::Status CheckSameModel(const ModelLayout& cluster_layout) const;

  // Copies flat FP32 weights into the parameters.
  void LoadWeights(absl::Span<const float> flat);
  // Makes every parameter a view of `flat` (the whole flat space): weights
  // pulled into it are the model's, with no copy. `flat` must stay where it
  // is, and hold its values, while the model computes on it.
  void BindTo(absl::Span<float> flat);
  // Copies the parameters out (for Init).
  std::vector<float> FlattenWeights() const;
  // Copies the parameters' gradients out (a parameter without a gradient
  // contributes zeros) and returns the sum of their squares, the squared
  // global norm that clipping needs.
  double GatherGradients(absl::Span<float> flat) const;
  // The same for parameter i (layout order) alone; safe to call from
  // another thread once backward has produced that parameter's gradient.
  double GatherGradient(size_t i, absl::Span<float> flat) const;

  // The parameters, in layout order.
  const std::vector<torch::Tensor>& parameters() const { return params_; }

 private:
  ParameterBinding(ModelLayout layout, std::vector<torch::Tensor> params)
      : layout_(std::move(layout)), params_(std::move(params)) {}
  static absl::StatusOr<ParameterBinding> FromNamed(
      const std::vector<std::pair<std::string, torch::Tensor>>& named);

  ModelLayout layout_;
  std::vector<torch::Tensor> params_;  // Same order as layout_.tensors().
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_MODEL_PARAMETER_BINDING_H_
