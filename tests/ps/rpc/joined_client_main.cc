// spotps-test-joined-client ADDRESSES: connects to the shards, joins them
// (Cluster::Join: the Join calls, then a presence stream to every shard),
// says so on stdout and waits until it is killed. Lets a test kill a
// trainer-like client between two pushes.
#include <unistd.h>

#include <cstdio>

#include "client/cluster.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s ADDRESSES\n", argv[0]);
    return 2;
  }
  auto cluster = spotps::Cluster::Connect(argv[1]);
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<int> counted = (*cluster)->Join();
  if (!counted.ok()) {
    std::fprintf(stderr, "%s\n", counted.status().ToString().c_str());
    return 1;
  }
  std::printf("joined, counted by %d shards\n", *counted);
  std::fflush(stdout);
  for (;;) pause();
}
