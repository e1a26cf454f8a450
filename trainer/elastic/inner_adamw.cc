#include "trainer/elastic/inner_adamw.h"

#include <cmath>

namespace spotps {

InnerAdamW::InnerAdamW(size_t num_elements, const InnerAdamWOptions& options)
    : options_(options), m_(num_elements, 0.0f), v_(num_elements, 0.0f) {}

void InnerAdamW::Step(absl::Span<float> weights, absl::Span<const float> gradient) {
  steps_ += 1;
  const InnerAdamWOptions& o = options_;
  const float correction1 = 1.0f - std::pow(o.beta1, static_cast<float>(steps_));
  const float correction2 = 1.0f - std::pow(o.beta2, static_cast<float>(steps_));
  const float step_size = o.lr / correction1;
  const float sqrt_correction2 = std::sqrt(correction2);
  const float decay = 1.0f - o.lr * o.weight_decay;
  const size_t n = weights.size();
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float g = gradient[i];
    m_[i] = o.beta1 * m_[i] + (1.0f - o.beta1) * g;
    v_[i] = o.beta2 * v_[i] + (1.0f - o.beta2) * g * g;
    weights[i] =
        weights[i] * decay - step_size * m_[i] / (std::sqrt(v_[i]) / sqrt_correction2 + o.eps);
  }
}

}  // namespace spotps
