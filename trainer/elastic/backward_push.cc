#include "trainer/elastic/backward_push.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <utility>

namespace spotps {

BackwardPush::BackwardPush(const ParameterBinding& binding, const PartitionMap& map)
    : binding_(binding),
      map_(map),
      partitions_of_(binding.parameters().size()),
      overlap_count_(map.partitions().size(), 0) {
  const std::vector<TensorSlot>& slots = binding.layout().tensors();
  for (size_t i = 0; i < slots.size(); ++i) {
    for (const PartitionRange& r : map.Cover(slots[i].flat_offset, slots[i].num_elements)) {
      partitions_of_[i].push_back(r.partition_id);
      overlap_count_[r.partition_id] += 1;
    }
  }
  // A leaf's accumulator runs once per backward, after the engine summed
  // every contribution (a tied weight's too): its post hook sees the final
  // gradient in grad(). DDP's reducer hooks the same place.
  for (size_t i = 0; i < binding.parameters().size(); ++i) {
    std::shared_ptr<torch::autograd::Node> acc =
        torch::autograd::impl::grad_accumulator(binding.parameters()[i]);
    if (acc == nullptr) continue;  // Not a leaf that requires grad: End takes it.
    hook_keys_.push_back(acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const torch::autograd::variable_list& outputs,
                  const torch::autograd::variable_list&) {
          OnGradientReady(i);
          return outputs;
        })));
    accumulators_.push_back(std::move(acc));
  }
  sender_ = std::thread([this] { SenderLoop(); });
}

BackwardPush::~BackwardPush() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  sender_.join();
  for (size_t k = 0; k < accumulators_.size(); ++k) accumulators_[k]->del_post_hook(hook_keys_[k]);
}

void BackwardPush::Begin(GradientStream* stream, absl::Span<float> gradient) {
  stream_ = stream;
  gradient_ = gradient;
  missing_ = overlap_count_;
  taken_.assign(partitions_of_.size(), 0);
  squares_ = 0;
  absl::MutexLock lock(&mu_);
  armed_ = true;
}

void BackwardPush::OnGradientReady(size_t parameter) {
  absl::MutexLock lock(&mu_);
  if (armed_) ready_.push_back(parameter);
}

void BackwardPush::SenderLoop() {
  while (true) {
    size_t i;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](BackwardPush* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->quit_ || !self->ready_.empty();
          },
          this));
      if (quit_) return;
      i = ready_.front();
      ready_.pop_front();
      busy_ = true;
    }
    Take(i);
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

void BackwardPush::Take(size_t i) {
  if (taken_[i]) return;
  taken_[i] = 1;
  squares_ += binding_.GatherGradient(i, gradient_);
  for (uint32_t id : partitions_of_[i]) {
    if (--missing_[id] == 0) stream_->Send(id, gradient_.data() + map_.partitions()[id].flat_begin);
  }
}

double BackwardPush::End() {
  {
    absl::MutexLock lock(&mu_);
    armed_ = false;
    mu_.Await(absl::Condition(
        +[](BackwardPush* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
          return self->ready_.empty() && !self->busy_;
        },
        this));
  }
  // Parameters backward gave no gradient (or no hook): zeros, sent now.
  for (size_t i = 0; i < partitions_of_.size(); ++i) Take(i);
  stream_ = nullptr;
  return squares_;
}

}  // namespace spotps
