// spotps-generate: reads the latest weights through the client library, the
// way a serving process would, reports their validation loss and samples
// text from them.
//
//   spotps-generate --ps=127.0.0.1:7000,127.0.0.1:7001 --model=small --data=kjv.tokens
#include <cmath>
#include <cstdio>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cluster.h"
#include "common/atomic_file.h"
#include "common/command_line.h"
#include "common/crash_report.h"
#include "common/exit_status.h"
#include "common/log.h"
#include "common/security_flags.h"
#include "common/transport_args.h"
#include "common/usage_problems.h"
#include "trainer/data/tokenizer_factory.h"
#include "trainer/data/training_data.h"
#include "trainer/model/model_flags.h"
#include "trainer/model/parameter_binding.h"
#include "trainer/model/pretrained_weights.h"
#include "trainer/model/text_generation.h"
#include "trainer/runtime/compute_runtime.h"

ABSL_FLAG(std::string, ps, "127.0.0.1:7000", "Shard addresses host:port,... in shard order.");
ABSL_FLAG(std::string, data, "",
          "Token file; if set, prints its validation loss, and prompts and samples go through "
          "the tokenizer it names.");
ABSL_FLAG(std::string, data_format, "spotps", "spotps or raw_u16 (see spotps-trainer).");
ABSL_FLAG(std::string, tokenizer, "",
          "Tokenizer for prompts and samples (byte, gpt2, gpt2:DIR, sp_model:PATH); default: the "
          "one --data names, else byte.");
ABSL_FLAG(int64_t, eval_batches, 16, "Validation batches for the loss.");
ABSL_FLAG(int64_t, batch, 8, "Validation batch size.");
ABSL_FLAG(int64_t, seq_len, 128, "Validation sequence length.");
ABSL_FLAG(std::string, prompts, "In the beginning|And the LORD said", "Prompts, '|'-separated.");
ABSL_FLAG(int64_t, tokens, 160, "Tokens to generate per prompt.");
ABSL_FLAG(double, temperature, 0.8, "Sampling temperature; 0: greedy.");
ABSL_FLAG(int64_t, top_k, 40, "Sample among the k likeliest tokens; 0: all.");
ABSL_FLAG(uint64_t, seed, 7, "Sampling seed.");
ABSL_FLAG(double, wait_s, 30, "Seconds to wait for the model to be initialised.");
ABSL_FLAG(std::string, logits_out, "",
          "Write the logits for --logits_tokens to this JSON file and exit (checks against "
          "other implementations).");
ABSL_FLAG(std::string, logits_tokens, "1,2,3", "Comma-separated token ids for --logits_out.");

namespace {

using spotps::RuntimeError;
using spotps::UsageError;

absl::StatusOr<std::vector<int64_t>> ParseTokenIds(absl::string_view text) {
  std::vector<int64_t> ids;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t id;
    if (!absl::SimpleAtoi(part, &id) || id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--logits_tokens: '", part, "' is not a token id"));
    }
    ids.push_back(id);
  }
  return ids;
}

// {"dtype": "bf16", "tokens": [...], "logits": [[...], ...]}, floats with
// enough digits to read back exactly.
absl::Status WriteLogits(spotps::TrainableModel& model, const std::vector<int64_t>& tokens,
                         spotps::ComputeDType dtype, const std::string& path) {
  absl::StatusOr<std::vector<std::vector<float>>> logits = spotps::LogitsFor(model, tokens, dtype);
  if (!logits.ok()) return logits.status();
  std::string json =
      absl::StrCat("{\"dtype\": \"", spotps::ComputeDTypeName(dtype), "\", \"tokens\": [",
                   absl::StrJoin(tokens, ","), "], \"logits\": [");
  for (size_t t = 0; t < logits->size(); ++t) {
    absl::StrAppend(
        &json, t == 0 ? "[" : ",\n[",
        absl::StrJoin((*logits)[t], ",",
                      [](std::string* out, float v) { absl::StrAppendFormat(out, "%.9g", v); }),
        "]");
  }
  absl::StrAppend(&json, "]}\n");
  return spotps::WriteFileAtomically(path, json);
}

// --tokenizer, else the tokenizer --data was made with, else bytes.
std::unique_ptr<spotps::Tokenizer> TokenizerFromFlags(const spotps::TrainingData* data,
                                                      spotps::UsageProblems& problems) {
  std::string spec = absl::GetFlag(FLAGS_tokenizer);
  std::optional<spotps::TokenizerIdentity> identity;
  if (data != nullptr) {
    if (const spotps::TokenDataset* tokens = spotps::AsTokenDataset(*data)) {
      identity = tokens->header().tokenizer;
    } else if (const spotps::LabeledDataset* labeled = spotps::AsLabeledDataset(*data)) {
      identity = labeled->header().tokenizer;
    }
  }
  if (spec.empty() && identity.has_value() && identity->kind != spotps::TokenizerKind::kUnknown) {
    return problems.Take(spotps::OpenTokenizerOf(*identity, data->path()), "--data's tokenizer")
        .value_or(nullptr);
  }
  if (spec.empty()) spec = "byte";
  std::optional<spotps::TokenizerSpec> parsed =
      problems.Take(spotps::ParseTokenizerSpec(spec), "--tokenizer");
  if (!parsed.has_value()) return nullptr;
  return problems
      .Take(spotps::MakeTokenizer(*parsed, {}, spotps::SentencePieceModelType::kBpe), "--tokenizer")
      .value_or(nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("sample text from the weights a spotps cluster holds");
  spotps::InstallCrashReport(argv[0]);
  spotps::SetLogProgramName("spotps-generate");
  spotps::ParseFlagsOrExit(argc, argv);
  spotps::TuneAllocatorForBulkTransfers();
  absl::StatusOr<spotps::ComputeRuntimeOptions> compute = spotps::ComputeRuntimeOptionsFromFlags();
  if (!compute.ok()) return UsageError(compute.status());
  const spotps::ComputeDType dtype = compute->dtype;
  absl::StatusOr<spotps::ComputeRuntimeInfo> runtime = spotps::ConfigureComputeRuntime(*compute);
  if (!runtime.ok()) return RuntimeError(runtime.status());
  absl::StatusOr<std::vector<int64_t>> logits_tokens =
      ParseTokenIds(absl::GetFlag(FLAGS_logits_tokens));
  if (!logits_tokens.ok()) return UsageError(logits_tokens.status());
  if (spotps::CheckFlagsOnly()) return spotps::kExitSuccess;
  // Local files before the network: every mistake is reported at once.
  spotps::UsageProblems problems;
  std::unique_ptr<spotps::TrainingData> data;
  std::optional<spotps::TokenFileFormat> format =
      problems.Take(spotps::ParseTokenFileFormat(absl::GetFlag(FLAGS_data_format)), "--data_format");
  if (const std::string path = absl::GetFlag(FLAGS_data); !path.empty() && format.has_value()) {
    data = problems.Take(spotps::OpenTrainingData(path, *format), "--data").value_or(nullptr);
  }
  // The weights come from the shards: a preset needs no initial values.
  std::unique_ptr<spotps::TrainableModel> model =
      problems.Take(spotps::ModelFromFlags(std::nullopt)).value_or(nullptr);
  const int64_t seq_len = data != nullptr && data->fixed_seq_len() > 0 ? data->fixed_seq_len()
                                                                         : absl::GetFlag(FLAGS_seq_len);
  if (model != nullptr && data != nullptr) {
    problems.Check(spotps::CheckModelFitsData(*model, *data, absl::GetFlag(FLAGS_batch), seq_len));
  }
  std::unique_ptr<spotps::Tokenizer> tokenizer = TokenizerFromFlags(data.get(), problems);
  if (!problems.empty()) return UsageError(problems.ToStatus());
  absl::StatusOr<spotps::ParameterBinding> binding = spotps::ParameterBinding::Create(*model);
  if (!binding.ok()) return RuntimeError(binding.status());

  absl::StatusOr<spotps::ChannelSecurity> security = spotps::ChannelSecurityFromFlags();
  if (!security.ok()) return UsageError(security.status());
  spotps::ClusterOptions cluster_options;
  cluster_options.security = *std::move(security);
  auto cluster = spotps::Cluster::Connect(absl::GetFlag(FLAGS_ps), cluster_options);
  if (!cluster.ok()) return RuntimeError(cluster.status());
  if (auto s = (*cluster)->WaitForLayout(absl::Seconds(absl::GetFlag(FLAGS_wait_s))); !s.ok()) {
    return RuntimeError(s);
  }
  if (auto s = binding->CheckSameModel((*cluster)->layout()); !s.ok()) return UsageError(s);
  spotps::WeightSnapshot weights;
  if (auto s = (*cluster)->Pull(spotps::v1::DTYPE_FP32, &weights); !s.ok()) return RuntimeError(s);
  binding->LoadWeights(weights.values);
  if (const std::string path = absl::GetFlag(FLAGS_logits_out); !path.empty()) {
    if (auto s = WriteLogits(*model, *logits_tokens, dtype, path); !s.ok()) return RuntimeError(s);
    std::printf("logits: %zu tokens -> %s\n", logits_tokens->size(), path.c_str());
    return 0;
  }

  if (data != nullptr) {
    absl::StatusOr<spotps::Evaluation> eval =
        spotps::Evaluate(*model, *data, absl::GetFlag(FLAGS_batch), seq_len,
                         absl::GetFlag(FLAGS_eval_batches), dtype);
    if (!eval.ok()) return RuntimeError(eval.status());
    std::printf("eval: val_loss=%.4f", eval->loss);
    if (eval->accuracy >= 0) std::printf(" val_accuracy=%.4f", eval->accuracy);
    std::printf(" rows=%lld\n", static_cast<long long>(eval->rows));
  }
  if (model->task() != spotps::Task::kLanguageModel) return 0;  // A classifier samples nothing.
  spotps::GenerationOptions options;
  options.max_new_tokens = absl::GetFlag(FLAGS_tokens);
  options.temperature = absl::GetFlag(FLAGS_temperature);
  options.top_k = absl::GetFlag(FLAGS_top_k);
  options.dtype = dtype;
  options.seed = absl::GetFlag(FLAGS_seed);
  for (absl::string_view prompt : absl::StrSplit(absl::GetFlag(FLAGS_prompts), '|')) {
    options.seed += 1;  // Each prompt gets its own sample stream.
    std::vector<uint32_t> prompt_tokens;
    if (absl::Status s = tokenizer->Encode(prompt, prompt_tokens); !s.ok()) {
      return UsageError(absl::InvalidArgumentError(absl::StrCat("--prompts: ", s.message())));
    }
    std::vector<int64_t> ids(prompt_tokens.begin(), prompt_tokens.end());
    auto generated = spotps::Generate(*model, ids, options);
    if (!generated.ok()) return RuntimeError(generated.status());
    std::printf("--- %s%s\n", std::string(prompt).c_str(), tokenizer->Decode(*generated).c_str());
  }
  return 0;
}
