// A spotps job spread over the hosts of a NetworkHosts: hosts 0..S-1 run the
// shards, the hosts after them the trainers, each process binding and
// connecting only to its host's address. The multi-host and fault tests
// share it; what they vary (optimizer, leases, checkpoints, deadlines) goes
// in as extra flags.
#ifndef SPOTPS_TESTS_SUPPORT_HOSTED_JOB_H_
#define SPOTPS_TESTS_SUPPORT_HOSTED_JOB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/child_process.h"
#include "tests/support/network_hosts.h"

namespace spotps::testing {

struct HostedShards {
  int count = 2;
  int port = 7000;
  std::vector<std::string> flags;              // For every shard.
  std::vector<std::string> coordinator_flags;  // Shard 0 only; --peers is added.
  bool checkpoints = false;                    // Shard I checkpoints into DIR/ckptI.
};

// "ADDRESS:PORT" of each shard, shard 0 first.
std::vector<std::string> HostedShardAddresses(const NetworkHosts& hosts, const HostedShards& spec);

// Starts the shards on hosts 0..count-1, the last first (shard 0 coordinates
// and needs its peers), each logging to DIR/shardI.log, and waits up to 30 s
// for each to listen. An error carries the shards' log tails.
absl::StatusOr<std::vector<std::unique_ptr<ChildProcess>>> StartHostedShards(
    const NetworkHosts& hosts, const std::string& dir, const HostedShards& spec);

// Starts trainer `index` on host shards + index, logging to DIR/trainerI.log:
// the tiny model, batch 8 x 64, one thread, no evaluation, plus `extra`.
absl::StatusOr<std::unique_ptr<ChildProcess>> StartHostedTrainer(
    const NetworkHosts& hosts, const std::string& dir, const HostedShards& shards, int index,
    const std::string& tokens, const std::vector<std::string>& extra = {});

// Every `"key":N` in `json` (spotps-ctl status --json), in order, and
// their sum.
std::vector<int64_t> JsonValues(const std::string& json, const std::string& key);
int64_t JsonSum(const std::string& json, const std::string& key);

}  // namespace spotps::testing

#endif  // SPOTPS_TESTS_SUPPORT_HOSTED_JOB_H_
