#include "ps/store/optimizer.h"

#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spotps {
namespace {

// Gradients are read straight from wire bytes, which carry no alignment
// promise: elements are loaded with memcpy (the same vector loads).
// `scale` multiplies each element (PushRequest.gradient_scale); 1 is exact.
struct Fp32Grad {
  const char* p;
  float scale;
  float operator[](int64_t i) const {
    float f;
    std::memcpy(&f, p + 4 * i, sizeof(f));
    return f * scale;
  }
};

struct Bf16Grad {
  const char* p;
  float scale;
  float operator[](int64_t i) const {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, sizeof(h));
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f * scale;
  }
};

struct AdamWStep {
  float decay;  // 1 - lr * weight_decay
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float bias2_sqrt;  // sqrt(1 - beta2^t)
  float eps;
  float step_size;  // lr / (1 - beta1^t)
};

template <typename Grad>
inline void AdamWKernel(float* __restrict w, float* __restrict m, float* __restrict v, Grad g,
                        int64_t n, const AdamWStep& s) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float wi = w[i] * s.decay;
    const float mi = m[i] * s.beta1 + gi * s.one_minus_beta1;
    const float vi = v[i] * s.beta2 + gi * gi * s.one_minus_beta2;
    m[i] = mi;
    v[i] = vi;
    w[i] = wi - s.step_size * (mi / (std::sqrt(vi) / s.bias2_sqrt + s.eps));
  }
}

// Delay compensation (see staleness_method.h): moves a stale gradient to the
// current weights before the usual AdamW update. The last update is read
// back from m and v with the previous step's bias corrections.
struct DelayCompensation {
  float factor;           // lambda * staleness
  float last_step_size;   // 1 / (1 - beta1^(t-1)): the update in units of lr
  float last_bias2_sqrt;  // sqrt(1 - beta2^(t-1))
};

template <typename Grad>
inline void AdamWDcKernel(float* __restrict w, float* __restrict m, float* __restrict v, Grad g,
                          int64_t n, const AdamWStep& s, const DelayCompensation& dc) {
  for (int64_t i = 0; i < n; ++i) {
    const float raw = g[i];
    const float rms = std::sqrt(v[i]) / dc.last_bias2_sqrt + s.eps;
    const float last_update = -dc.last_step_size * (m[i] / rms);
    const float gi = raw + dc.factor * (raw * raw / rms) * last_update;
    const float wi = w[i] * s.decay;
    const float mi = m[i] * s.beta1 + gi * s.one_minus_beta1;
    const float vi = v[i] * s.beta2 + gi * gi * s.one_minus_beta2;
    m[i] = mi;
    v[i] = vi;
    w[i] = wi - s.step_size * (mi / (std::sqrt(vi) / s.bias2_sqrt + s.eps));
  }
}

struct SgdStep {
  float lr, weight_decay, momentum, one_minus_dampening;
  bool nesterov, first;
};

template <typename Grad>
inline void SgdKernel(float* __restrict w, float* __restrict buf, Grad g, int64_t n,
                      const SgdStep& s) {
  // Fused multiply-adds where LibTorch's vectorized add(x, alpha) uses them,
  // so both round the same way.
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i];
    if (s.weight_decay != 0.0f) d = std::fma(w[i], s.weight_decay, d);
    if (buf != nullptr) {
      const float b = s.first ? d : std::fma(d, s.one_minus_dampening, buf[i] * s.momentum);
      buf[i] = b;
      d = s.nesterov ? std::fma(b, s.momentum, d) : b;
    }
    w[i] = std::fma(d, -s.lr, w[i]);
  }
}

// A share s < 1 of a round (an update that holds some of the k pushes it
// waited for, local_rounds.h): its momentum steps by that share, so that
// the updates a round splits into carry the buffer about as far as one
// whole round would. The carried term (mu * buf, Nesterov's mu^2 * buf)
// takes s of itself, and the buffer decays by 1 - s (1 - mu) instead of
// mu; s = 1 is torch's step. Without it each piece of a split round would
// add the whole carried term again (a round in two halves: ~1.7x as far
// at mu = 0.9).
template <typename Grad>
inline void SgdShareKernel(float* __restrict w, float* __restrict buf, Grad g, int64_t n,
                           const SgdStep& s, float share) {
  const float carry = share * s.momentum;
  const float decay = 1.0f - share * (1.0f - s.momentum);
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i];
    if (s.weight_decay != 0.0f) d = std::fma(w[i], s.weight_decay, d);
    const float old = s.first ? 0.0f : buf[i];
    const float fresh = s.first ? d : d * s.one_minus_dampening;
    buf[i] = std::fma(old, decay, fresh);
    const float step = std::fma(old, carry, s.nesterov ? d : fresh);
    d = s.nesterov ? std::fma(step, s.momentum, d) : step;
    w[i] = std::fma(d, -s.lr, w[i]);
  }
}

// Delayed Nesterov: w moves by lr * d at once; the buffer steps only when
// `apply`, with every d since its last step (the deferred sum), and adds
// its Nesterov term then. k updates of which the last applies move w by
// exactly one torch Nesterov step on their sum.
template <typename Grad>
inline void DelayedNesterovKernel(float* __restrict w, float* __restrict buf,
                                  float* __restrict deferred, Grad g, int64_t n, const SgdStep& s,
                                  bool apply) {
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i];
    if (s.weight_decay != 0.0f) d = std::fma(w[i], s.weight_decay, d);
    if (!apply) {
      deferred[i] += d;
      w[i] = std::fma(d, -s.lr, w[i]);
      continue;
    }
    const float b = std::fma(buf[i], s.momentum, deferred[i] + d);
    buf[i] = b;
    deferred[i] = 0.0f;
    w[i] = std::fma(std::fma(b, s.momentum, d), -s.lr, w[i]);
  }
}

// One clone per ISA; the loader picks the widest the CPU has at start-up.
#define SPOTPS_ISA_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

SPOTPS_ISA_CLONES void AdamWFp32(float* w, float* m, float* v, const char* g, float scale,
                                 int64_t n, const AdamWStep& s) {
  AdamWKernel(w, m, v, Fp32Grad{g, scale}, n, s);
}
SPOTPS_ISA_CLONES void AdamWBf16(float* w, float* m, float* v, const char* g, float scale,
                                 int64_t n, const AdamWStep& s) {
  AdamWKernel(w, m, v, Bf16Grad{g, scale}, n, s);
}
SPOTPS_ISA_CLONES void AdamWDcFp32(float* w, float* m, float* v, const char* g, float scale,
                                   int64_t n, const AdamWStep& s, const DelayCompensation& dc) {
  AdamWDcKernel(w, m, v, Fp32Grad{g, scale}, n, s, dc);
}
SPOTPS_ISA_CLONES void AdamWDcBf16(float* w, float* m, float* v, const char* g, float scale,
                                   int64_t n, const AdamWStep& s, const DelayCompensation& dc) {
  AdamWDcKernel(w, m, v, Bf16Grad{g, scale}, n, s, dc);
}
SPOTPS_ISA_CLONES void SgdFp32(float* w, float* buf, const char* g, float scale, int64_t n,
                                const SgdStep& s) {
  SgdKernel(w, buf, Fp32Grad{g, scale}, n, s);
}
SPOTPS_ISA_CLONES void SgdBf16(float* w, float* buf, const char* g, float scale, int64_t n,
                                const SgdStep& s) {
  SgdKernel(w, buf, Bf16Grad{g, scale}, n, s);
}

SPOTPS_ISA_CLONES void SgdShareFp32(float* w, float* buf, const char* g, float scale, int64_t n,
                                    const SgdStep& s, float share) {
  SgdShareKernel(w, buf, Fp32Grad{g, scale}, n, s, share);
}
SPOTPS_ISA_CLONES void SgdShareBf16(float* w, float* buf, const char* g, float scale, int64_t n,
                                    const SgdStep& s, float share) {
  SgdShareKernel(w, buf, Bf16Grad{g, scale}, n, s, share);
}

SPOTPS_ISA_CLONES void DelayedNesterovFp32(float* w, float* buf, float* deferred, const char* g,
                                           float scale, int64_t n, const SgdStep& s, bool apply) {
  DelayedNesterovKernel(w, buf, deferred, Fp32Grad{g, scale}, n, s, apply);
}
SPOTPS_ISA_CLONES void DelayedNesterovBf16(float* w, float* buf, float* deferred, const char* g,
                                           float scale, int64_t n, const SgdStep& s, bool apply) {
  DelayedNesterovKernel(w, buf, deferred, Bf16Grad{g, scale}, n, s, apply);
}

}  // namespace

absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name) {
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "adamw") return OptimizerKind::kAdamW;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer '", name, "' (expected sgd or adamw)"));
}

std::string DescribeOptimizer(const OptimizerConfig& c) {
  if (c.kind == OptimizerKind::kAdamW) return "adamw";
  if (c.momentum == 0.0f) return "sgd";
  return absl::StrCat("sgd(momentum=", c.momentum,
                      c.delayed_momentum ? ",delayed nesterov)"
                      : c.nesterov       ? ",nesterov)"
                                         : ")");
}

absl::Status ValidateOptimizerConfig(const OptimizerConfig& c) {
  auto bad = [](auto... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (!(c.weight_decay >= 0.0f) || !std::isfinite(c.weight_decay)) {
    return bad("weight_decay must be finite and >= 0, got ", c.weight_decay);
  }
  if (c.kind == OptimizerKind::kSgd) {
    if (!(c.momentum >= 0.0f && c.momentum < 1.0f)) {
      return bad("momentum must be in [0, 1), got ", c.momentum);
    }
    if (!(c.dampening >= 0.0f && c.dampening <= 1.0f)) {
      return bad("dampening must be in [0, 1], got ", c.dampening);
    }
    if (c.nesterov && (c.momentum == 0.0f || c.dampening != 0.0f)) {
      return bad("nesterov needs momentum > 0 and dampening 0");
    }
    if (c.delayed_momentum && !c.nesterov) {
      return bad("delayed Nesterov momentum needs nesterov, momentum > 0 and dampening 0");
    }
    return absl::OkStatus();
  }
  if (c.delayed_momentum) return bad("delayed Nesterov momentum is SGD's, not AdamW's");
  if (!(c.beta1 >= 0.0f && c.beta1 < 1.0f) || !(c.beta2 >= 0.0f && c.beta2 < 1.0f)) {
    return bad("beta1 and beta2 must be in [0, 1), got ", c.beta1, " and ", c.beta2);
  }
  if (!(c.eps > 0.0f) || !std::isfinite(c.eps)) return bad("eps must be > 0, got ", c.eps);
  return absl::OkStatus();
}

int Optimizer::state_slots() const {
  if (config_.kind == OptimizerKind::kAdamW) return 2;
  if (config_.momentum == 0.0f) return 0;
  return config_.delayed_momentum ? 2 : 1;
}

void Optimizer::Apply(float* params, float* const* state, const GradientView& grad, int64_t n,
                      float lr, uint64_t step, float compensation, float beta1, MomentumPhase phase,
                      float round_share) const {
  const bool bf16 = grad.dtype == v1::DTYPE_BF16;
  const OptimizerConfig& c = config_;
  if (c.kind == OptimizerKind::kAdamW) {
    const float b1 = beta1 >= 0.0f ? beta1 : c.beta1;
    // Scalars in double, as LibTorch computes them, then rounded once.
    const double bias1 = 1.0 - std::pow(static_cast<double>(b1), static_cast<double>(step));
    const double bias2 = 1.0 - std::pow(static_cast<double>(c.beta2), static_cast<double>(step));
    const AdamWStep s{static_cast<float>(1.0 - static_cast<double>(lr) * c.weight_decay),
                      b1,
                      static_cast<float>(1.0 - b1),
                      c.beta2,
                      static_cast<float>(1.0 - c.beta2),
                      static_cast<float>(std::sqrt(bias2)),
                      c.eps,
                      static_cast<float>(lr / bias1)};
    // The first update has no earlier one to compensate for.
    if (compensation > 0.0f && step > 1) {
      const double last1 = 1.0 - std::pow(static_cast<double>(b1), step - 1.0);
      const double last2 = 1.0 - std::pow(static_cast<double>(c.beta2), step - 1.0);
      const DelayCompensation dc{compensation, static_cast<float>(1.0 / last1),
                                 static_cast<float>(std::sqrt(last2))};
      const char* g = static_cast<const char*>(grad.data);
      if (bf16) {
        AdamWDcBf16(params, state[0], state[1], g, grad.scale, n, s, dc);
      } else {
        AdamWDcFp32(params, state[0], state[1], g, grad.scale, n, s, dc);
      }
      return;
    }
    if (bf16) {
      AdamWBf16(params, state[0], state[1], static_cast<const char*>(grad.data), grad.scale, n, s);
    } else {
      AdamWFp32(params, state[0], state[1], static_cast<const char*>(grad.data), grad.scale, n, s);
    }
    return;
  }
  const float momentum = beta1 >= 0.0f ? beta1 : c.momentum;
  const SgdStep s{lr, c.weight_decay, momentum, 1.0f - c.dampening, c.nesterov, step <= 1};
  float* buf = state_slots() > 0 ? state[0] : nullptr;
  if (c.delayed_momentum) {
    const bool apply = phase != MomentumPhase::kDefer;
    const char* g = static_cast<const char*>(grad.data);
    if (bf16) {
      DelayedNesterovBf16(params, buf, state[1], g, grad.scale, n, s, apply);
    } else {
      DelayedNesterovFp32(params, buf, state[1], g, grad.scale, n, s, apply);
    }
    return;
  }
  if (buf != nullptr && round_share < 1.0f) {
    const char* g = static_cast<const char*>(grad.data);
    if (bf16) {
      SgdShareBf16(params, buf, g, grad.scale, n, s, round_share);
    } else {
      SgdShareFp32(params, buf, g, grad.scale, n, s, round_share);
    }
    return;
  }
  if (bf16) {
    SgdBf16(params, buf, static_cast<const char*>(grad.data), grad.scale, n, s);
  } else {
    SgdFp32(params, buf, static_cast<const char*>(grad.data), grad.scale, n, s);
  }
}

}  // namespace spotps
