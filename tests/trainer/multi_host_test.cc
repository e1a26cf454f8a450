// A spotps job across 5 "hosts" (tests/support/network_hosts.h): 2 shards
// and 3 trainers, each in its own network namespace with its own address on
// a bridge, binding and connecting only to those addresses (loopback is
// down everywhere). Run without and with link caps (tbf: 1 Gbit/s per
// trainer, 4 Gbit/s per shard; SPOTPS_MULTIHOST_TRAINER_MBIT and
// SPOTPS_MULTIHOST_SHARD_MBIT change them). Every unit must be committed, the job done
// and the validation loss well below its start. Each run prints
//   multihost: caps=... tokens_per_s=... units=... duplicated=... reissued=... val_loss=...
// Needs root: without it the test fails, it does not skip.
#include <gtest/gtest.h>
#include <signal.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/hosted_job.h"
#include "tests/support/log_fields.h"
#include "tests/support/network_hosts.h"
#include "tests/support/training_job.h"
#include "trainer/model/builtin_model.h"
#include "trainer/model/gpt_config.h"
#include "trainer/model/gpt_model.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;
using testing::JsonSum;
using testing::LogField;
using testing::NetworkHosts;

constexpr int kShards = 2, kTrainers = 3, kEpochs = 2, kUnits = 150, kPort = 7000;

class MultiHostTest : public ::testing::Test {
 protected:
  void RunJob(bool caps);

  testing::TempDir dir_;
};

// A cap in Mbit/s: $name if set (to try other rates by hand), else `fallback`.
int64_t CapFromEnv(const char* name, int64_t fallback) {
  const char* value = getenv(name);
  int64_t mbit = 0;
  return value != nullptr && absl::SimpleAtoi(value, &mbit) && mbit > 0 ? mbit : fallback;
}

void MultiHostTest::RunJob(bool caps) {
  const std::string dir = dir_.path();
  const int64_t shard_mbit = caps ? CapFromEnv("SPOTPS_MULTIHOST_SHARD_MBIT", 4000) : 0;
  const int64_t trainer_mbit = caps ? CapFromEnv("SPOTPS_MULTIHOST_TRAINER_MBIT", 1000) : 0;
  std::vector<testing::HostSpec> specs;
  for (int i = 0; i < kShards; ++i) specs.push_back({absl::StrCat("shard", i), shard_mbit});
  for (int i = 0; i < kTrainers; ++i) specs.push_back({absl::StrCat("trainer", i), trainer_mbit});
  auto made = NetworkHosts::Create(specs);
  if (caps && made.status().code() == absl::StatusCode::kUnimplemented) {
    GTEST_SKIP() << "this kernel cannot cap links: " << made.status();
  }
  ASSERT_TRUE(made.ok()) << made.status();
  NetworkHosts& hosts = **made;
  if (caps) {
    auto qdisc = hosts.Run(kShards, {"tc", "qdisc", "show", "dev", "eth0"});
    ASSERT_TRUE(qdisc.ok()) << qdisc.status();
    EXPECT_NE(qdisc->find("tbf"), std::string::npos) << *qdisc;
  }
  std::cout << "multihost: subnet " << hosts.subnet() << ", shards at " << hosts.address(0) << ", "
            << hosts.address(1) << std::endl;

  auto tokens = testing::MakeTokenFile(dir, 5000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  auto data = OpenTrainingData(*tokens, TokenFileFormat::kSpotps);
  ASSERT_TRUE(data.ok()) << data.status();
  // Every trainer initialises from seed 1234: this is the starting loss.
  BuiltinGptModel initial(*CreateGptModel(*GptConfigFromPreset("tiny"), 1234), "tiny");
  auto start = Evaluate(initial, **data, 8, 64, 8, ComputeDType::kFP32);
  ASSERT_TRUE(start.ok()) << start.status();
  const absl::StatusOr<double> start_loss = start->loss;

  const testing::HostedShards spec{
      kShards,
      kPort,
      {"--optimizer=adamw", "--lr=2e-3", "--warmup_steps=10"},
      {absl::StrCat("--epochs=", kEpochs), absl::StrCat("--units_per_epoch=", kUnits),
       "--worker_lease_s=3", "--unit_lease_s=10", "--checkpoint_every_s=5"},
      /*checkpoints=*/true};
  const std::vector<std::string> shard_addresses = testing::HostedShardAddresses(hosts, spec);
  const std::string ps = absl::StrJoin(shard_addresses, ",");
  auto shards = testing::StartHostedShards(hosts, dir, spec);
  ASSERT_TRUE(shards.ok()) << shards.status();
  // Listening on the namespace's address only, not on every interface.
  for (int i = 0; i < kShards; ++i) {
    auto sockets = hosts.Run(i, {"ss", "-Hltn"});
    ASSERT_TRUE(sockets.ok()) << sockets.status();
    EXPECT_NE(sockets->find(" " + shard_addresses[i] + " "), std::string::npos) << *sockets;
    for (const char* any : {" 0.0.0.0:7000 ", " *:7000 ", " [::]:7000 "}) {
      EXPECT_EQ(sockets->find(any), std::string::npos) << *sockets;
    }
  }

  std::vector<std::unique_ptr<ChildProcess>> trainers;
  for (int t = 0; t < kTrainers; ++t) {
    auto trainer = testing::StartHostedTrainer(hosts, dir, spec, t, *tokens);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    trainers.push_back(*std::move(trainer));
  }
  double tokens_per_s = 0, seconds = 0;
  int64_t units_trained = 0;
  for (int t = 0; t < kTrainers; ++t) {
    auto code = trainers[t]->Wait(absl::Seconds(300));
    ASSERT_TRUE(code.ok()) << code.status() << testing::LogTails(dir);
    const std::string log = *ReadFile(absl::StrCat(dir, "/trainer", t, ".log"));
    ASSERT_EQ(*code, 0) << log;
    EXPECT_EQ(LogField(log, "job_done"), 1) << log;
    tokens_per_s += LogField(log, "tokens_per_s");
    units_trained += static_cast<int64_t>(LogField(log, "units"));
    seconds = std::max(seconds, LogField(log, "seconds"));
  }

  // The coordinator's account, read from a trainer's host by spotps-ctl.
  auto status = hosts.Run(kShards, {BinaryPath("spotps-ctl"), "--ps=" + ps, "status", "--json"});
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_NE(status->find("\"done\":true"), std::string::npos) << *status;
  const int64_t committed = JsonSum(*status, "committed");
  const int64_t duplicated = JsonSum(*status, "duplicated");
  const int64_t reissued = JsonSum(*status, "reissued");
  // What crossed the shards' links, on average while the trainers ran.
  const double shard_mbit_s =
      8e-6 * static_cast<double>(JsonSum(*status, "bytes_in") + JsonSum(*status, "bytes_out")) /
      std::max(seconds, 1.0);
  EXPECT_EQ(committed, kEpochs * kUnits) << *status;
  // A trainer counts the units it committed first; a unit trained twice
  // (its lease ran out under load) is counted as duplicated, never lost.
  EXPECT_EQ(units_trained, committed) << *status;

  auto generate =
      hosts.Run(kShards + 1,
                {BinaryPath("spotps-generate"), "--ps=" + ps, "--model=tiny", "--data=" + *tokens,
                 "--batch=8", "--seq_len=64", "--eval_batches=8", "--tokens=1", "--threads=1"});
  ASSERT_TRUE(generate.ok()) << generate.status();
  const double val_loss = LogField(*generate, "val_loss");
  ASSERT_GT(val_loss, 0) << *generate;
  EXPECT_LT(val_loss, 0.8 * *start_loss) << "start " << *start_loss << "\n"
                                         << *generate << testing::LogTails(dir);

  for (auto& s : *shards) s->Signal(SIGTERM);
  for (auto& s : *shards) {
    auto code = s->Wait(absl::Seconds(20));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0);
  }
  std::cout << "multihost: caps="
            << (caps ? absl::StrCat("trainers_", trainer_mbit, "mbit_shards_", shard_mbit, "mbit")
                     : "none")
            << " tokens_per_s=" << static_cast<int64_t>(tokens_per_s)
            << " shard_traffic_mbit_s=" << static_cast<int64_t>(shard_mbit_s)
            << " units=" << committed << " duplicated=" << duplicated << " reissued=" << reissued
            << " val_loss=" << val_loss << " start_loss=" << *start_loss << std::endl;

  // Nothing stays behind: no process of this run, no namespace.
  made->reset();
  EXPECT_EQ(testing::ProcessesMentioning(dir), 0);
}

TEST_F(MultiHostTest, FiveHostsWithoutLinkCaps) { RunJob(/*caps=*/false); }

TEST_F(MultiHostTest, FiveHostsWithCappedLinks) { RunJob(/*caps=*/true); }

TEST(NetworkHostsTest, RemovesEverythingAndSweepsLeftovers) {
  auto hosts = NetworkHosts::Create({{"a", 0}, {"b", 100}});
  if (hosts.status().code() == absl::StatusCode::kUnimplemented) {
    hosts = NetworkHosts::Create({{"a", 0}, {"b", 0}});  // No tbf here: test the rest.
  }
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  const std::vector<std::string> names = (*hosts)->ExistingNamespaces();
  EXPECT_EQ(names.size(), 3u);  // Two hosts and the bridge.
  auto route = (*hosts)->Run(0, {"ip", "route", "get", (*hosts)->address(1)});
  ASSERT_TRUE(route.ok()) << route.status();
  EXPECT_NE(route->find("dev eth0"), std::string::npos) << *route;
  auto sleeper = ChildProcess::Start((*hosts)->Command(1, {"sleep", "60"}), "/dev/null");
  ASSERT_TRUE(sleeper.ok());
  absl::SleepFor(absl::Milliseconds(200));
  hosts->reset();  // Kills what runs inside, deletes every namespace.
  auto code = (*sleeper)->Wait(absl::Seconds(10));
  ASSERT_TRUE(code.ok()) << "a process inside a host outlived it";
  EXPECT_EQ(*code, 128 + SIGKILL);
  for (const std::string& ns : names) {
    auto r = ChildProcess::Start({testing::IpBinary(), "netns", "pids", ns}, "/dev/null");
    ASSERT_TRUE(r.ok());
    EXPECT_NE(*(*r)->Wait(absl::Seconds(10)), 0) << ns << " still exists";
  }

  // A namespace left by a crashed run (its pid is gone) is swept.
  auto gone = ChildProcess::Start({"/bin/true"}, "/dev/null");
  ASSERT_TRUE(gone.ok());
  const pid_t dead = (*gone)->pid();
  ASSERT_TRUE((*gone)->Wait(absl::Seconds(10)).ok());
  const std::string leftover = absl::StrCat("spotps-nh-", dead, "-0-h0");
  auto add = ChildProcess::Start({testing::IpBinary(), "netns", "add", leftover}, "/dev/null");
  ASSERT_TRUE(add.ok());
  ASSERT_EQ(*(*add)->Wait(absl::Seconds(10)), 0);
  EXPECT_GE(NetworkHosts::SweepLeftovers(), 1);
  auto check = ChildProcess::Start({testing::IpBinary(), "netns", "pids", leftover}, "/dev/null");
  ASSERT_TRUE(check.ok());
  EXPECT_NE(*(*check)->Wait(absl::Seconds(10)), 0) << leftover << " was not swept";
}

}  // namespace
}  // namespace spotps
