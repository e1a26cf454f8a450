// spotps-consumer: what a service that serves a spotps-trained model does,
// built outside the spotps tree against the installed client library.
//
//   spotps-consumer host:port,host:port [tensor]
//
// Waits for the model, pulls it in FP32, prints one line about the cluster,
// one about the model and the first values of `tensor` (default wpe.weight).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "client/cluster.h"
#include "client/hf_gpt2_names.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s host:port,... [tensor]\n", argv[0]);
    return 2;
  }
  const std::string tensor = argc == 3 ? argv[2] : "wpe.weight";
  auto cluster = spotps::Cluster::Connect(argv[1]);
  if (!cluster.ok()) {
    std::fprintf(stderr, "consumer: %s\n", cluster.status().ToString().c_str());
    return 2;
  }
  if (absl::Status s = (*cluster)->WaitForLayout(absl::Seconds(30)); !s.ok()) {
    std::fprintf(stderr, "consumer: %s\n", s.ToString().c_str());
    return 1;
  }
  auto stats = (*cluster)->Stats();
  if (!stats.ok()) {
    std::fprintf(stderr, "consumer: %s\n", stats.status().ToString().c_str());
    return 1;
  }
  spotps::WeightSnapshot weights;
  if (absl::Status s = (*cluster)->Pull(spotps::v1::DTYPE_FP32, &weights); !s.ok()) {
    std::fprintf(stderr, "consumer: %s\n", s.ToString().c_str());
    return 1;
  }
  auto values = (*cluster)->PullTensor(tensor, spotps::v1::DTYPE_FP32);
  if (!values.ok()) {
    std::fprintf(stderr, "consumer: %s\n", values.status().ToString().c_str());
    return 1;
  }
  auto hf = spotps::HfGpt2NameFor(tensor);
  std::printf("consumer: shards=%zu global_step=%llu\n", (*cluster)->num_shards(),
              static_cast<unsigned long long>((*stats)[0].global_step()));
  std::printf("consumer: model %s, pulled %lld partitions\n",
              (*cluster)->layout().Summary().c_str(),
              static_cast<long long>(weights.partitions_received));
  std::printf("consumer: %s (Hugging Face %s) =", tensor.c_str(),
              hf.ok() ? hf->hf_name.c_str() : "-");
  for (size_t i = 0; i < values->size() && i < 4; ++i) std::printf(" %g", (*values)[i]);
  std::printf("\n");
  return 0;
}
