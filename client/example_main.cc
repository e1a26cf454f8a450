// spotps-client-example: reads the latest weights from a running cluster the
// way a serving process would, and prints what it found.
//
//   spotps-client-example --ps=127.0.0.1:7000,127.0.0.1:7001 [--tensor=wte.weight]
#include <cmath>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "client/cluster.h"
#include "common/command_line.h"
#include "common/exit_status.h"
#include "common/log.h"
#include "common/security_flags.h"

ABSL_FLAG(std::string, ps, "127.0.0.1:7000", "Shard addresses host:port,... in shard order.");
ABSL_FLAG(std::string, tensor, "", "Pull only this named tensor.");
ABSL_FLAG(int, wait_s, 30, "Seconds to wait for the model to be initialised.");

namespace {

double Norm(const float* v, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]) * v[i];
  return std::sqrt(sum);
}

using spotps::RuntimeError;
using spotps::UsageError;

}  // namespace

int main(int argc, char** argv) {
  spotps::SetLogProgramName("spotps-client-example");
  spotps::ParseFlagsOrExit(argc, argv);
  absl::StatusOr<spotps::ChannelSecurity> security = spotps::ChannelSecurityFromFlags();
  if (!security.ok()) return UsageError(security.status());
  spotps::ClusterOptions cluster_options;
  cluster_options.security = *std::move(security);
  auto cluster = spotps::Cluster::Connect(absl::GetFlag(FLAGS_ps), cluster_options);
  if (!cluster.ok()) return RuntimeError(cluster.status());
  if (auto s = (*cluster)->WaitForLayout(absl::Seconds(absl::GetFlag(FLAGS_wait_s))); !s.ok()) {
    return RuntimeError(s);
  }
  const spotps::ModelLayout& layout = (*cluster)->layout();
  std::printf("model: %s on %zu shards\n", layout.Summary().c_str(), (*cluster)->num_shards());

  if (const std::string name = absl::GetFlag(FLAGS_tensor); !name.empty()) {
    auto values = (*cluster)->PullTensor(name, spotps::v1::DTYPE_FP32);
    if (!values.ok()) return RuntimeError(values.status());
    std::printf("%s: %zu elements, L2 norm %.6f\n", name.c_str(), values->size(),
                Norm(values->data(), values->size()));
    return 0;
  }
  spotps::WeightSnapshot weights;
  if (auto s = (*cluster)->Pull(spotps::v1::DTYPE_BF16, &weights); !s.ok()) return RuntimeError(s);
  for (const spotps::TensorSlot& t : layout.tensors()) {
    std::printf("  %-40s %10lld elements  L2 norm %.6f\n", t.name.c_str(),
                static_cast<long long>(t.num_elements),
                Norm(weights.values.data() + t.flat_offset, t.num_elements));
  }
  auto stats = (*cluster)->Stats();
  if (!stats.ok()) return RuntimeError(stats.status());
  for (const auto& st : *stats) {
    std::printf("shard %u: global_step=%llu pushes=%llu mean_staleness=%.2f lr=%.3g\n",
                st.shard_index(), static_cast<unsigned long long>(st.global_step()),
                static_cast<unsigned long long>(st.pushes_applied()), st.mean_staleness(),
                st.learning_rate());
  }
  return 0;
}
