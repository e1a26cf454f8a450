// A GPT-style decoder-only transformer written with torch::nn modules: token
// and learned position embeddings, pre-LayerNorm blocks of causal multi-head
// self-attention and a 4x GELU MLP, a final LayerNorm and an output head
// tied to the token embedding.
//
// Precision policy. Under a ComputePrecisionScope(kBF16) the linear layers
// and attention matmuls run in BF16 through CPU autocast; LayerNorm, softmax,
// the residual stream, the logits and the loss are FP32 (LibTorch 1.13's CPU
// autocast would otherwise leave LayerNorm and softmax in BF16). Parameters
// and their gradients are always FP32.

#ifndef SPOTPS_TRAINER_MODEL_GPT_MODEL_H_
#define SPOTPS_TRAINER_MODEL_GPT_MODEL_H_

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "trainer/model/gpt_config.h"
#include "trainer/model/trainable_model.h"
#include "trainer/runtime/compute_precision.h"

namespace spotps {

// Owns every parameter of one GPT model. named_parameters() is the model's
// stable layout: the same config always yields the same names, order and
// shapes, and the tied output head adds no parameter of its own.
//
// Names: wte.weight, wpe.weight, then for each block i
// blocks.<i>.{ln_1,attn.qkv,attn.proj,ln_2,mlp.fc,mlp.proj}.{weight,bias},
// then ln_f.weight, ln_f.bias.
class GptModelImpl : public torch::nn::Module {
 public:
  // Builds the model and initializes it from `seed`: equal (config, seed)
  // give bit-identical parameters. Weights are drawn from N(0, 0.02), the
  // residual output projections from N(0, 0.02 / sqrt(2 * n_layer)); biases
  // are zero and LayerNorms start as the identity. Throws c10::Error on an
  // invalid config; prefer CreateGptModel(), which returns a Status.
  // Without a seed every parameter is zero (CreateUninitializedGptModel).
  GptModelImpl(const GptConfig& config, std::optional<uint64_t> seed);

  // tokens: int64 [B, T] with T <= context_len and ids < vocab_size.
  // Returns FP32 logits [B, T, vocab_size]; position t sees tokens 0..t only.
  torch::Tensor forward(const torch::Tensor& tokens);

  const GptConfig& config() const { return config_; }
  // False for CreateUninitializedGptModel's zeros: such weights must never
  // be offered to the shards as a model's initial values.
  bool initialized() const { return initialized_; }

 private:
  GptConfig config_;
  bool initialized_;
  torch::Tensor wte_;  // wte.weight [vocab_size, d_model], also the tied head.
  torch::Tensor wpe_;  // wpe.weight [context_len, d_model].
  torch::nn::Dropout embedding_dropout_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::LayerNorm ln_f_{nullptr};
};
TORCH_MODULE(GptModel);

// Validates `config` and builds a model initialized from `seed`.
absl::StatusOr<GptModel> CreateGptModel(const GptConfig& config, uint64_t seed);
// Validates `config` and builds a model whose parameters are all zero, to
// be overwritten: a worker that joins a running job pulls its weights
// from the shards, so drawing random ones (0.2 s for `small`) is waste.
absl::StatusOr<GptModel> CreateUninitializedGptModel(const GptConfig& config);

// Forward pass plus NextTokenCrossEntropy() at `dtype`, ready for
// backward(). Bad shapes or token ids come back as InvalidArgument.
absl::StatusOr<torch::Tensor> ComputeLoss(GptModel& model, const torch::Tensor& inputs,
                                          const torch::Tensor& targets, ComputeDType dtype);

}  // namespace spotps

#endif  // SPOTPS_TRAINER_MODEL_GPT_MODEL_H_
