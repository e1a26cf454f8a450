// spotps-generate: reads the latest weights through the client library, the
// way a serving process would, reports their validation loss and samples
// text from them.
//
//   spotps-generate --ps=127.0.0.1:7000,127.0.0.1:7001 --model=small --data=kjv.tokens
#include <cmath>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "client/cluster.h"
#include "common/command_line.h"
#include "common/exit_status.h"
#include "common/log.h"
#include "common/security_flags.h"
#include "common/transport_args.h"
#include "trainer/data/byte_tokenizer.h"
#include "trainer/model/evaluation.h"
#include "trainer/model/model_flags.h"
#include "trainer/model/parameter_binding.h"
#include "trainer/model/text_generation.h"
#include "trainer/runtime/compute_runtime.h"

ABSL_FLAG(std::string, ps, "127.0.0.1:7000", "Shard addresses host:port,... in shard order.");
ABSL_FLAG(std::string, data, "", "Token file; if set, prints its validation loss.");
ABSL_FLAG(int64_t, eval_batches, 16, "Validation batches for the loss.");
ABSL_FLAG(int64_t, batch, 8, "Validation batch size.");
ABSL_FLAG(int64_t, seq_len, 128, "Validation sequence length.");
ABSL_FLAG(std::string, prompts, "In the beginning|And the LORD said", "Prompts, '|'-separated.");
ABSL_FLAG(int64_t, tokens, 160, "Tokens to generate per prompt.");
ABSL_FLAG(double, temperature, 0.8, "Sampling temperature; 0: greedy.");
ABSL_FLAG(int64_t, top_k, 40, "Sample among the k likeliest tokens; 0: all.");
ABSL_FLAG(uint64_t, seed, 7, "Sampling seed.");
ABSL_FLAG(double, wait_s, 30, "Seconds to wait for the model to be initialised.");

namespace {

using spotps::RuntimeError;
using spotps::UsageError;

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("sample text from the weights a spotps cluster holds");
  spotps::SetLogProgramName("spotps-generate");
  spotps::ParseFlagsOrExit(argc, argv);
  spotps::TuneAllocatorForBulkTransfers();
  absl::StatusOr<spotps::ComputeRuntimeOptions> compute = spotps::ComputeRuntimeOptionsFromFlags();
  if (!compute.ok()) return UsageError(compute.status());
  const spotps::ComputeDType dtype = compute->dtype;
  absl::StatusOr<spotps::ComputeRuntimeInfo> runtime = spotps::ConfigureComputeRuntime(*compute);
  if (!runtime.ok()) return RuntimeError(runtime.status());
  absl::StatusOr<spotps::GptConfig> config = spotps::GptConfigFromFlags();
  if (!config.ok()) return UsageError(config.status());
  if (spotps::CheckFlagsOnly()) return spotps::kExitSuccess;
  absl::StatusOr<spotps::GptModel> model = spotps::CreateGptModel(*config, 0);
  if (!model.ok()) return RuntimeError(model.status());
  absl::StatusOr<spotps::ParameterBinding> binding = spotps::ParameterBinding::Create(**model);
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
  if (auto s = binding->CheckSameModel((*cluster)->layout()); !s.ok()) return RuntimeError(s);
  spotps::WeightSnapshot weights;
  if (auto s = (*cluster)->Pull(spotps::v1::DTYPE_FP32, &weights); !s.ok()) return RuntimeError(s);
  binding->LoadWeights(weights.values);

  if (!absl::GetFlag(FLAGS_data).empty()) {
    auto data = spotps::TokenDataset::Open(absl::GetFlag(FLAGS_data));
    if (!data.ok()) return RuntimeError(data.status());
    auto loss = spotps::ValidationLoss(*model, *data, absl::GetFlag(FLAGS_batch),
                                       absl::GetFlag(FLAGS_seq_len),
                                       absl::GetFlag(FLAGS_eval_batches), dtype);
    if (!loss.ok()) return RuntimeError(loss.status());
    std::printf("eval: val_loss=%.4f\n", *loss);
  }
  spotps::GenerationOptions options;
  options.max_new_tokens = absl::GetFlag(FLAGS_tokens);
  options.temperature = absl::GetFlag(FLAGS_temperature);
  options.top_k = absl::GetFlag(FLAGS_top_k);
  options.dtype = dtype;
  options.seed = absl::GetFlag(FLAGS_seed);
  for (absl::string_view prompt : absl::StrSplit(absl::GetFlag(FLAGS_prompts), '|')) {
    options.seed += 1;  // Each prompt gets its own sample stream.
    std::vector<uint16_t> prompt_tokens;
    spotps::AppendByteTokens(prompt, prompt_tokens);
    std::vector<int64_t> ids(prompt_tokens.begin(), prompt_tokens.end());
    auto generated = spotps::Generate(*model, ids, options);
    if (!generated.ok()) return RuntimeError(generated.status());
    std::printf("--- %s%s\n", std::string(prompt).c_str(),
                spotps::BytesFromTokens(*generated).c_str());
  }
  return 0;
}
