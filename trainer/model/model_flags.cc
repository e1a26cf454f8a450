#include "trainer/model/model_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, model, "tiny", "Model preset: tiny, small or gpt2-124m.");
ABSL_FLAG(int64_t, n_layer, 0, "Override the preset's number of blocks.");
ABSL_FLAG(int64_t, n_head, 0, "Override the preset's attention heads.");
ABSL_FLAG(int64_t, d_model, 0, "Override the preset's width.");
ABSL_FLAG(int64_t, context_len, 0, "Override the preset's context length.");
ABSL_FLAG(int64_t, vocab_size, 0, "Override the preset's vocabulary size.");
ABSL_FLAG(int, threads, 0, "Intra-op threads; 0: one per physical core.");
ABSL_FLAG(std::string, dtype, "bf16", "Compute precision: bf16 or fp32.");

namespace spotps {

absl::StatusOr<GptConfig> GptConfigFromFlags() {
  absl::StatusOr<GptConfig> config = GptConfigFromPreset(absl::GetFlag(FLAGS_model));
  if (!config.ok()) return config.status();
  auto override_with = [](int64_t flag, int64_t& field) {
    if (flag > 0) field = flag;
  };
  override_with(absl::GetFlag(FLAGS_n_layer), config->n_layer);
  override_with(absl::GetFlag(FLAGS_n_head), config->n_head);
  override_with(absl::GetFlag(FLAGS_d_model), config->d_model);
  override_with(absl::GetFlag(FLAGS_context_len), config->context_len);
  override_with(absl::GetFlag(FLAGS_vocab_size), config->vocab_size);
  if (absl::Status s = ValidateGptConfig(*config); !s.ok()) return s;
  return config;
}

absl::StatusOr<ComputeRuntimeOptions> ComputeRuntimeOptionsFromFlags() {
  absl::StatusOr<ComputeDType> dtype = ParseComputeDType(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return dtype.status();
  ComputeRuntimeOptions options;
  options.threads = absl::GetFlag(FLAGS_threads);
  options.dtype = *dtype;
  return options;
}

}  // namespace spotps
