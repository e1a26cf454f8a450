#include "tests/support/hosted_job.h"

#include <numeric>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/atomic_file.h"
#include "tests/support/training_job.h"

namespace spotps::testing {

std::vector<std::string> HostedShardAddresses(const NetworkHosts& hosts, const HostedShards& spec) {
  std::vector<std::string> addresses;
  for (int i = 0; i < spec.count; ++i)
    addresses.push_back(absl::StrCat(hosts.address(i), ":", spec.port));
  return addresses;
}

absl::StatusOr<std::vector<std::unique_ptr<ChildProcess>>> StartHostedShards(
    const NetworkHosts& hosts, const std::string& dir, const HostedShards& spec) {
  const std::vector<std::string> addresses = HostedShardAddresses(hosts, spec);
  std::vector<std::unique_ptr<ChildProcess>> shards(spec.count);
  for (int i = spec.count - 1; i >= 0; --i) {
    const std::string port_file = absl::StrCat(dir, "/shard", i, ".port");
    std::vector<std::string> argv = {BinaryPath("spotps-ps"),
                                     "--listen=" + addresses[i],
                                     "--insecure",
                                     "--port_file=" + port_file,
                                     absl::StrCat("--shard_index=", i),
                                     absl::StrCat("--num_shards=", spec.count)};
    argv.insert(argv.end(), spec.flags.begin(), spec.flags.end());
    if (spec.checkpoints) argv.push_back(absl::StrCat("--checkpoint_dir=", dir, "/ckpt", i));
    if (i == 0) {
      argv.insert(argv.end(), spec.coordinator_flags.begin(), spec.coordinator_flags.end());
      if (spec.count > 1) {
        argv.push_back("--peers=" + absl::StrJoin(addresses.begin() + 1, addresses.end(), ","));
      }
    }
    auto shard =
        ChildProcess::Start(hosts.Command(i, argv), absl::StrCat(dir, "/shard", i, ".log"));
    if (!shard.ok()) return shard.status();
    shards[i] = *std::move(shard);
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (!ReadFile(port_file).ok() && shards[i]->running() && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    if (!ReadFile(port_file).ok()) {
      return absl::DeadlineExceededError(
          absl::StrCat("shard ", i, " did not listen within 30 s", LogTails(dir)));
    }
  }
  return shards;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> StartHostedTrainer(
    const NetworkHosts& hosts, const std::string& dir, const HostedShards& shards, int index,
    const std::string& tokens, const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {
      BinaryPath("spotps-trainer"),
      "--ps=" + absl::StrJoin(HostedShardAddresses(hosts, shards), ","),
      "--model=tiny",
      "--data=" + tokens,
      "--batch=8",
      "--seq_len=64",
      "--threads=1",
      absl::StrCat("--worker_index=", index),
      "--log_every=20",
      "--eval_batches=0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return ChildProcess::Start(hosts.Command(shards.count + index, argv),
                             absl::StrCat(dir, "/trainer", index, ".log"));
}

std::vector<int64_t> JsonValues(const std::string& json, const std::string& key) {
  std::vector<int64_t> values;
  const std::regex re("\"" + key + "\":([0-9]+)");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), re); it != std::sregex_iterator();
       ++it) {
    values.push_back(std::stoll((*it)[1]));
  }
  return values;
}

int64_t JsonSum(const std::string& json, const std::string& key) {
  const std::vector<int64_t> values = JsonValues(json, key);
  return std::accumulate(values.begin(), values.end(), int64_t{0});
}

}  // namespace spotps::testing
