#include "trainer/model/gpt_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>

#include "trainer/model/tanh_gelu.h"
#include "trainer/runtime/torch_status.h"

namespace spotps {
namespace {

constexpr double kInitStd = 0.02;

// A linear layer whose parameters start at zero. LibTorch's Linear draws
// random ones in its constructor: a pass over every weight that
// ParameterInitializer, or a joining worker's first pull, overwrites
// anyway (0.1 s of a `small` trainer's start-up).
class DenseImpl : public torch::nn::Module {
 public:
  DenseImpl(int64_t in_features, int64_t out_features)
      : weight(register_parameter("weight", torch::zeros({out_features, in_features}))),
        bias(register_parameter("bias", torch::zeros({out_features}))) {}
  torch::Tensor forward(const torch::Tensor& x) { return torch::linear(x, weight, bias); }

  torch::Tensor weight, bias;
};
TORCH_MODULE(Dense);

// An embedding table that starts at zero, for the same reason.
class TableImpl : public torch::nn::Module {
 public:
  TableImpl(int64_t rows, int64_t width)
      : weight(register_parameter("weight", torch::zeros({rows, width}))) {}

  torch::Tensor weight;
};
TORCH_MODULE(Table);

// Holds the random stream that initializes one model, so initialization is
// a pure function of the seed and never touches LibTorch's global generator.
struct ParameterInitializer {
  at::Generator generator;
  double residual_std;

  void Normal(const torch::Tensor& weight, double std) { weight.normal_(0.0, std, generator); }
  void Linear(const Dense& linear, double std) {
    Normal(linear->weight, std);
    linear->bias.zero_();
  }
  void LayerNorm(const torch::nn::LayerNorm& norm) {
    norm->weight.fill_(1.0);
    norm->bias.zero_();
  }
};

torch::nn::LayerNorm MakeLayerNorm(int64_t width) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({width}));
}

// The precision policy's FP32 island: LayerNorm always sees an FP32 input,
// so it normalizes in FP32 even when autocast produced a BF16 activation.
torch::Tensor NormalizeInFp32(torch::nn::LayerNorm& norm, const torch::Tensor& x) {
  return norm(x.to(torch::kFloat));
}

// Added to the attention scores: 0 where position t may attend (at or
// before t), -inf above the diagonal.
torch::Tensor CausalBias(int64_t length) {
  return torch::full({length, length}, -std::numeric_limits<float>::infinity()).triu(1);
}

// Query rows [begin, end) attend to keys [0, end) only; splitting the rows
// into blocks skips most of the masked upper triangle. Two blocks save a
// quarter of the score work; more blocks cost more in small-kernel overhead
// than they save at these lengths.
int64_t CausalBlocks(int64_t length) { return length >= 128 ? 2 : 1; }

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GptConfig& config)
      : n_head_(config.n_head),
        qkv_(register_module("qkv", Dense(config.d_model, 3 * config.d_model))),
        proj_(register_module("proj", Dense(config.d_model, config.d_model))),
        attn_dropout_(register_module("attn_dropout", torch::nn::Dropout(config.dropout))),
        resid_dropout_(register_module("resid_dropout", torch::nn::Dropout(config.dropout))) {}

  void Initialize(ParameterInitializer& init) {
    init.Linear(qkv_, kInitStd);
    init.Linear(proj_, init.residual_std);
  }

  // x: [B, T, C]; causal_bias: [T, T] (CausalBias).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& causal_bias) {
    const int64_t batch = x.size(0), length = x.size(1), width = x.size(2);
    const int64_t head_width = width / n_head_;
    // [B, T, C] -> [B * H, T, head_width], for batched matmuls.
    auto split_heads = [&](const torch::Tensor& t) {
      return t.view({batch, length, n_head_, head_width})
          .transpose(1, 2)
          .reshape({batch * n_head_, length, head_width});
    };
    std::vector<torch::Tensor> qkv = qkv_(x).split(width, /*dim=*/2);
    // Attention runs in the compute dtype, as in PyTorch eager. Widening the
    // scores to FP32 bought no precision (the score matmul already rounded
    // them to BF16) and cost five extra passes over [B, H, T, T] forward and
    // backward; softmax accumulates in FP32 inside its kernel. The scale is
    // folded into q (T / head_width times fewer elements), and the mask is
    // baddbmm's added term, fused into the score matmul.
    torch::Tensor q = split_heads(qkv[0].mul(1.0 / std::sqrt(double(head_width))));
    torch::Tensor k = split_heads(qkv[1]);
    torch::Tensor v = split_heads(qkv[2]);
    const int64_t blocks = CausalBlocks(length);
    std::vector<torch::Tensor> outputs;
    for (int64_t i = 0; i < blocks; ++i) {
      const int64_t begin = length * i / blocks, end = length * (i + 1) / blocks;
      torch::Tensor scores =
          torch::baddbmm(causal_bias.slice(0, begin, end).slice(1, 0, end), q.slice(1, begin, end),
                         k.slice(1, 0, end).transpose(1, 2));
      torch::Tensor probs = attn_dropout_(torch::softmax(scores, /*dim=*/-1));
      outputs.push_back(torch::bmm(probs, v.slice(1, 0, end)));
    }
    torch::Tensor y = (blocks == 1 ? outputs[0] : torch::cat(outputs, /*dim=*/1))
                          .view({batch, n_head_, length, head_width})
                          .transpose(1, 2)
                          .reshape({batch, length, width});
    return resid_dropout_(proj_(y));
  }

 private:
  int64_t n_head_;
  Dense qkv_;
  Dense proj_;
  torch::nn::Dropout attn_dropout_;
  torch::nn::Dropout resid_dropout_;
};
TORCH_MODULE(CausalSelfAttention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const GptConfig& config)
      : fc_(register_module("fc", Dense(config.d_model, 4 * config.d_model))),
        proj_(register_module("proj", Dense(4 * config.d_model, config.d_model))),
        dropout_(register_module("dropout", torch::nn::Dropout(config.dropout))) {}

  void Initialize(ParameterInitializer& init) {
    init.Linear(fc_, kInitStd);
    init.Linear(proj_, init.residual_std);
  }

  torch::Tensor forward(const torch::Tensor& x) {
    return dropout_(proj_(TanhGelu(fc_(x))));
  }

 private:
  Dense fc_;
  Dense proj_;
  torch::nn::Dropout dropout_;
};
TORCH_MODULE(Mlp);

class TransformerBlockImpl : public torch::nn::Module {
 public:
  explicit TransformerBlockImpl(const GptConfig& config)
      : ln_1_(register_module("ln_1", MakeLayerNorm(config.d_model))),
        attn_(register_module("attn", CausalSelfAttention(config))),
        ln_2_(register_module("ln_2", MakeLayerNorm(config.d_model))),
        mlp_(register_module("mlp", Mlp(config))) {}

  void Initialize(ParameterInitializer& init) {
    init.LayerNorm(ln_1_);
    attn_->Initialize(init);
    init.LayerNorm(ln_2_);
    mlp_->Initialize(init);
  }

  // The residual stream x stays FP32: adding a BF16 branch output to it
  // promotes the sum to FP32.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& causal_bias) {
    torch::Tensor h = x + attn_(NormalizeInFp32(ln_1_, x), causal_bias);
    return h + mlp_(NormalizeInFp32(ln_2_, h));
  }

 private:
  torch::nn::LayerNorm ln_1_;
  CausalSelfAttention attn_;
  torch::nn::LayerNorm ln_2_;
  Mlp mlp_;
};

}  // namespace

GptModelImpl::GptModelImpl(const GptConfig& config, std::optional<uint64_t> seed)
    : config_(config), initialized_(seed.has_value()) {
  const absl::Status valid = ValidateGptConfig(config);
  TORCH_CHECK_VALUE(valid.ok(), std::string(valid.message()));

  wte_ = register_module("wte", Table(config.vocab_size, config.d_model))->weight;
  wpe_ = register_module("wpe", Table(config.context_len, config.d_model))->weight;
  embedding_dropout_ = register_module("embedding_dropout", torch::nn::Dropout(config.dropout));
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    blocks_->push_back(std::make_shared<TransformerBlockImpl>(config));
  }
  ln_f_ = register_module("ln_f", MakeLayerNorm(config.d_model));
  if (!seed.has_value()) return;

  torch::NoGradGuard no_grad;
  ParameterInitializer init{at::make_generator<at::CPUGeneratorImpl>(*seed),
                            kInitStd / std::sqrt(2.0 * double(config.n_layer))};
  init.Normal(wte_, kInitStd);
  init.Normal(wpe_, kInitStd);
  for (const std::shared_ptr<torch::nn::Module>& block : *blocks_) {
    block->as<TransformerBlockImpl>()->Initialize(init);
  }
  init.LayerNorm(ln_f_);
}

torch::Tensor GptModelImpl::forward(const torch::Tensor& tokens) {
  TORCH_CHECK_VALUE(tokens.dim() == 2 && tokens.scalar_type() == torch::kLong,
                    "GPT input must be int64 [batch, time], got ", tokens.scalar_type(), " ",
                    tokens.sizes());
  const int64_t length = tokens.size(1);
  TORCH_CHECK_VALUE(length <= config_.context_len, "sequence length ", length,
                    " exceeds the model's context_len ", config_.context_len);

  torch::Tensor positions = torch::arange(length, torch::kLong);
  torch::Tensor x =
      embedding_dropout_(torch::embedding(wte_, tokens) + torch::embedding(wpe_, positions));
  const torch::Tensor causal_bias = CausalBias(length);
  for (const std::shared_ptr<torch::nn::Module>& block : *blocks_) {
    x = block->as<TransformerBlockImpl>()->forward(x, causal_bias);
  }
  // Tied head: the token embedding matrix doubles as the output projection.
  torch::Tensor h = NormalizeInFp32(ln_f_, x);
  return torch::linear(h, wte_).to(torch::kFloat);
}

absl::StatusOr<GptModel> CreateGptModel(const GptConfig& config, uint64_t seed) {
  if (absl::Status status = ValidateGptConfig(config); !status.ok()) {
    return status;
  }
  return CatchTorchErrors([&] { return GptModel(config, seed); });
}

absl::StatusOr<GptModel> CreateUninitializedGptModel(const GptConfig& config) {
  if (absl::Status status = ValidateGptConfig(config); !status.ok()) {
    return status;
  }
  return CatchTorchErrors([&] { return GptModel(config, std::nullopt); });
}

absl::StatusOr<torch::Tensor> ComputeLoss(GptModel& model, const torch::Tensor& inputs,
                                          const torch::Tensor& targets, ComputeDType dtype) {
  ComputePrecisionScope precision(dtype);
  return CatchTorchErrors([&] { return NextTokenCrossEntropy(model->forward(inputs), targets); });
}

}  // namespace spotps
