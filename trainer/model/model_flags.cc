#include "trainer/model/model_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "trainer/model/builtin_model.h"
#include "trainer/model/torchscript_model.h"

ABSL_FLAG(std::string, model, "tiny",
          "Model: a preset (tiny, small or gpt2-124m) or a TorchScript file (PATH.pt; see "
          "docs/models.md for its contract).");
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

absl::StatusOr<std::unique_ptr<TrainableModel>> ModelFromFlags(std::optional<uint64_t> seed) {
  const std::string model = absl::GetFlag(FLAGS_model);
  if (IsModelFile(model)) {
    for (const auto& [flag, value] :
         {std::make_pair("--n_layer", absl::GetFlag(FLAGS_n_layer)),
          std::make_pair("--n_head", absl::GetFlag(FLAGS_n_head)),
          std::make_pair("--d_model", absl::GetFlag(FLAGS_d_model)),
          std::make_pair("--context_len", absl::GetFlag(FLAGS_context_len)),
          std::make_pair("--vocab_size", absl::GetFlag(FLAGS_vocab_size))}) {
      if (value != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, " changes a preset; a TorchScript file (--model=", model, ") fixes its own"));
      }
    }
    absl::StatusOr<std::unique_ptr<TorchScriptModel>> loaded = TorchScriptModel::Load(model);
    if (!loaded.ok()) return loaded.status();
    return std::unique_ptr<TrainableModel>(*std::move(loaded));
  }
  absl::StatusOr<GptConfig> config = GptConfigFromFlags();
  if (!config.ok()) return config.status();
  absl::StatusOr<std::unique_ptr<BuiltinGptModel>> built =
      BuiltinGptModel::Create(*config, seed, model);
  if (!built.ok()) return built.status();
  return std::unique_ptr<TrainableModel>(*std::move(built));
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
