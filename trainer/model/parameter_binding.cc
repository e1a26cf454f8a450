#include "trainer/model/parameter_binding.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace spotps {

absl::StatusOr<ParameterBinding> ParameterBinding::Create(TrainableModel& model) {
  return FromNamed(model.Parameters());
}

absl::StatusOr<ParameterBinding> ParameterBinding::Create(torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    named.emplace_back(item.key(), item.value());
  }
  return FromNamed(named);
}

absl::StatusOr<ParameterBinding> ParameterBinding::FromNamed(
    const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> specs;
  std::vector<torch::Tensor> params;
  for (const auto& [name, p] : named) {
    if (p.scalar_type() != torch::kFloat32 || !p.is_contiguous()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", name, "' is not a contiguous FP32 tensor"));
    }
    specs.push_back({name, p.sizes().vec()});
    params.push_back(p);
  }
  absl::StatusOr<ModelLayout> layout = ModelLayout::Create(std::move(specs));
  if (!layout.ok()) return layout.status();
  return ParameterBinding(*std::move(layout), std::move(params));
}

absl::Status ParameterBinding::CheckSameModel(const ModelLayout& cluster) const {
  if (cluster.fingerprint() == layout_.fingerprint()) return absl::OkStatus();
  const auto& ours = layout_.tensors();
  const auto& theirs = cluster.tensors();
  for (size_t i = 0; i < std::min(ours.size(), theirs.size()); ++i) {
    if (ours[i].name != theirs[i].name || ours[i].shape != theirs[i].shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the cluster trains a different model: its tensor ", i, " is '", theirs[i].name, "' [",
          absl::StrJoin(theirs[i].shape, ","), "], this trainer's is '", ours[i].name, "' [",
          absl::StrJoin(ours[i].shape, ","), "]; start the trainer with the job's --model"));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the cluster trains a different model (", cluster.Summary(), ") than this trainer (",
      layout_.Summary(), "); start the trainer with the job's --model"));
}

void ParameterBinding::LoadWeights(absl::Span<const float> flat) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const TensorSlot& slot = layout_.tensors()[i];
    std::memcpy(params_[i].data_ptr<float>(), flat.data() + slot.flat_offset,
                slot.num_elements * sizeof(float));
  }
}

void ParameterBinding::BindTo(absl::Span<float> flat) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const TensorSlot& slot = layout_.tensors()[i];
    // set_data keeps the parameter (its autograd state, and every module
    // slot that refers to it) and swaps what it reads.
    params_[i].set_data(
        torch::from_blob(flat.data() + slot.flat_offset, slot.shape, torch::kFloat32));
  }
}

std::vector<float> ParameterBinding::FlattenWeights() const {
  std::vector<float> flat(layout_.total_elements());
  for (size_t i = 0; i < params_.size(); ++i) {
    const TensorSlot& slot = layout_.tensors()[i];
    std::memcpy(flat.data() + slot.flat_offset, params_[i].data_ptr<float>(),
                slot.num_elements * sizeof(float));
  }
  return flat;
}

namespace {

// dst[0, n) = src[0, n); returns the sum of their squares. Sixteen float
// lanes per block of 4096 vectorize; blocks add up in double.
double CopyAndSumSquares(const float* src, float* dst, int64_t n) {
  double total = 0;
  for (int64_t block = 0; block < n; block += 4096) {
    const int64_t end = std::min(n, block + 4096);
    float lanes[16] = {};
    int64_t i = block;
    for (; i + 16 <= end; i += 16) {
      for (int j = 0; j < 16; ++j) {
        const float v = src[i + j];
        dst[i + j] = v;
        lanes[j] += v * v;
      }
    }
    for (; i < end; ++i) {
      dst[i] = src[i];
      lanes[0] += src[i] * src[i];
    }
    for (float lane : lanes) total += lane;
  }
  return total;
}

}  // namespace

double ParameterBinding::GatherGradient(size_t i, absl::Span<float> flat) const {
  const TensorSlot& slot = layout_.tensors()[i];
  float* dst = flat.data() + slot.flat_offset;
  const torch::Tensor& grad = params_[i].grad();
  if (!grad.defined()) {
    std::memset(dst, 0, slot.num_elements * sizeof(float));
    return 0;
  }
  const torch::Tensor g = grad.to(torch::kFloat32).contiguous();
  return CopyAndSumSquares(g.data_ptr<float>(), dst, slot.num_elements);
}

double ParameterBinding::GatherGradients(absl::Span<float> flat) const {
  double squares = 0;
  for (size_t i = 0; i < params_.size(); ++i) squares += GatherGradient(i, flat);
  return squares;
}

}  // namespace spotps
