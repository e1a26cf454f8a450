// The Python client (client/python, run by Debian's /usr/bin/python3)
// against real shard processes that this C++ side initialises and checks:
// what Python pulls equals what C++ set, a gradient Python pushes changes
// the weights by exactly -lr * g, Python's watch sees the change, and the
// README's fine-tuning example runs.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/cluster.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/test_certificates.h"

namespace spotps {
namespace {

using testing::ChildProcess;
using testing::LocalShardCluster;
using testing::TempDir;

constexpr double kLr = 0.0625;  // A power of two: lr * g is exact.

float Initial(int64_t i) { return static_cast<float>(i % 64) * 0.125f; }
float Pattern(int64_t i) { return static_cast<float>(i % 5 - 2); }

std::string ReadLog(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs a Python script with the built package on its path; returns its
// exit code and leaves its output in `log`.
int RunPython(const std::vector<std::string>& script_args, const std::string& log) {
  std::vector<std::string> argv = {"/usr/bin/env", "PYTHONPATH=" SPOTPS_PYTHON_DIR,
                                   "/usr/bin/python3"};
  argv.insert(argv.end(), script_args.begin(), script_args.end());
  auto child = ChildProcess::Start(argv, log);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return -1;
  auto code = (*child)->Wait(absl::Seconds(100));
  EXPECT_TRUE(code.ok()) << code.status();
  return code.ok() ? *code : -1;
}

// Shard 0 runs the coordinator, for checkpoint rounds on request.
std::unique_ptr<LocalShardCluster> StartShards(const TempDir& dir, double lr) {
  const std::string root = dir.path();
  auto shards = LocalShardCluster::Start(
      2,
      [lr, root](int i, const std::string& addresses) {
        std::vector<std::string> f = {"--optimizer=sgd", absl::StrCat("--lr=", lr),
                                      absl::StrCat("--checkpoint_dir=", root, "/ckpt", i)};
        if (i == 0) {
          f.insert(f.end(), {"--epochs=1", "--units_per_epoch=4",
                             "--peers=" + addresses.substr(addresses.find(',') + 1)});
        }
        return f;
      },
      dir.path());
  EXPECT_TRUE(shards.ok()) << shards.status();
  return shards.ok() ? *std::move(shards) : nullptr;
}

TEST(PythonClientTest, PullsWhatCppSetAndPushesExactlyMinusLrTimesTheGradient) {
  TempDir dir;
  auto shards = StartShards(dir, kLr);
  ASSERT_NE(shards, nullptr);
  auto cluster = *Cluster::Connect(shards->addresses());
  const ModelLayout layout =
      *ModelLayout::Create({{"embed", {300, 700}}, {"w", {129, 33}}, {"b", {9}}});
  const int64_t n = layout.total_elements();
  std::vector<float> w0(n);
  for (int64_t i = 0; i < n; ++i) w0[i] = Initial(i);
  ASSERT_TRUE(cluster->Init(layout, w0).ok());

  const std::string log = dir.path() + "/python.log";
  const int code = RunPython({SPOTPS_SOURCE_DIR "/tests/client/python_client_check.py",
                              "--ps=" + shards->addresses(), absl::StrCat("--lr=", kLr)},
                             log);
  ASSERT_EQ(code, 0) << ReadLog(log);

  // Python pushed Pattern (by flat index) for "embed" and "b", once.
  WeightSnapshot w;
  ASSERT_TRUE(cluster->Pull(v1::DTYPE_FP32, &w).ok());
  for (const TensorSlot& t : layout.tensors()) {
    const bool pushed = t.name != "w";
    for (int64_t i = t.flat_offset; i < t.flat_offset + t.num_elements; ++i) {
      const float want = pushed ? w0[i] - static_cast<float>(kLr) * Pattern(i) : w0[i];
      ASSERT_EQ(w.values[i], want) << t.name << " element " << i;
    }
  }
  auto stats = cluster->Stats();
  ASSERT_TRUE(stats.ok());
  uint64_t duplicates = 0;
  for (const auto& s : *stats) {
    EXPECT_LE(s.global_step(), 1u);
    duplicates += s.pushes_duplicate();
  }
  EXPECT_GE(duplicates, 1u);  // The retried push id.
}

// The example as the docs run it: against fresh shards it initialises its
// own head, trains it, and a second run goes on from the first's weights.
TEST(PythonClientTest, TheFineTuningExampleInitialisesAndTrainsTheShards) {
  TempDir dir;
  auto shards = StartShards(dir, 0.5);
  ASSERT_NE(shards, nullptr);
  constexpr int kSteps = 40;
  for (int run = 1; run <= 2; ++run) {
    const std::string log = absl::StrCat(dir.path(), "/finetune", run, ".log");
    const int code = RunPython({SPOTPS_SOURCE_DIR "/client/python/examples/finetune.py",
                                "--ps=" + shards->addresses(), absl::StrCat("--steps=", kSteps)},
                               log);
    const std::string output = ReadLog(log);
    ASSERT_EQ(code, 0) << output;
    EXPECT_EQ(output.find("initialised a new head") != std::string::npos, run == 1) << output;
  }
  auto cluster = *Cluster::Connect(shards->addresses());
  ASSERT_TRUE(cluster->FetchLayout().ok());
  EXPECT_EQ(cluster->layout().Summary().substr(0, 9), "2 tensors");
  auto stats = cluster->Stats();
  ASSERT_TRUE(stats.ok());
  uint64_t steps = 0;
  for (const auto& s : *stats) steps = std::max(steps, s.global_step());
  EXPECT_EQ(steps, static_cast<uint64_t>(2 * kSteps));  // Every step's push was applied.
}

// Python's init cuts the model into the shards' partitions (3 shards, big
// and small tensors), what C++ pulls is what Python set, a second init of
// the same layout is not applied, and another model is refused. After a
// shard restarts empty, init is kept there alone and says so.
TEST(PythonClientTest, InitialisesShardsAsTheCppClientWould) {
  TempDir dir;
  auto shards = LocalShardCluster::Start(3, {"--optimizer=sgd", "--lr=0.5"}, dir.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  const std::string log = dir.path() + "/init.log";
  const int code = RunPython(
      {SPOTPS_SOURCE_DIR "/tests/client/python_init_check.py", "--ps=" + (*shards)->addresses()},
      log);
  ASSERT_EQ(code, 0) << ReadLog(log);
  auto cluster = *Cluster::Connect((*shards)->addresses());
  ASSERT_TRUE(cluster->FetchLayout().ok());
  const ModelLayout want =
      *ModelLayout::Create({{"embed", {1500, 1100}}, {"w", {129, 33}}, {"b", {9}}});
  EXPECT_EQ(cluster->layout().fingerprint(), want.fingerprint());
  WeightSnapshot w;
  ASSERT_TRUE(cluster->Pull(v1::DTYPE_FP32, &w).ok());
  for (int64_t i = 0; i < want.total_elements(); ++i) {
    ASSERT_EQ(w.values[i], Initial(i)) << "element " << i;
  }

  (*shards)->shard(1).Signal(SIGTERM);
  auto exited = (*shards)->shard(1).Wait(absl::Seconds(30));
  ASSERT_TRUE(exited.ok()) << exited.status();
  ASSERT_TRUE((*shards)->Restart(1).ok());
  const int split = RunPython({SPOTPS_SOURCE_DIR "/tests/client/python_init_check.py",
                               "--ps=" + (*shards)->addresses(), "--after_restart"},
                              log);
  ASSERT_EQ(split, 0) << ReadLog(log);
}

// The Python client against a shard under mutual TLS with role tokens
// (python_security_check.py): a reader pulls and may not push, a trainer
// pushes, no token, no TLS or no client certificate gets nowhere.
TEST(PythonClientTest, SpeaksMutualTlsWithRoleTokens) {
  TempDir dir;
  const std::string pki = dir.path() + "/pki";
  ASSERT_EQ(mkdir(pki.c_str(), 0700), 0);
  absl::StatusOr<testing::TestCertificates> certs = testing::MakeTestCertificates(pki);
  ASSERT_TRUE(certs.ok()) << certs.status();
  const std::map<std::string, std::string> tokens = {{"reader", "reader-0123456789abcdef"},
                                                     {"trainer", "trainer-0123456789abcdef"},
                                                     {"admin", "admin-0123456789abcdef00"}};
  std::string table;
  for (const auto& [role, token] : tokens) {
    absl::StrAppend(&table, token, " ", role, "\n");
    ASSERT_TRUE(WriteFileAtomically(dir.path() + "/" + role + ".token", token + "\n").ok());
  }
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/tokens", table).ok());
  chmod((dir.path() + "/tokens").c_str(), 0600);
  auto shards = LocalShardCluster::Start(
      1,
      [&](int, const std::string&) {
        return std::vector<std::string>{"--optimizer=sgd",
                                        "--lr=0.5",
                                        "--tls_cert=" + certs->server_cert,
                                        "--tls_key=" + certs->server_key,
                                        "--tls_ca=" + certs->ca,
                                        "--auth_tokens=" + dir.path() + "/tokens"};
      },
      dir.path());
  ASSERT_TRUE(shards.ok()) << shards.status();

  ClusterOptions options;
  absl::StatusOr<ChannelSecurity> admin = LoadChannelSecurity(
      certs->ca, certs->client_cert, certs->client_key, dir.path() + "/admin.token");
  ASSERT_TRUE(admin.ok()) << admin.status();
  options.security = *admin;
  auto cluster = Cluster::Connect((*shards)->addresses(), options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const ModelLayout layout = *ModelLayout::Create({{"w", {64, 32}}});
  ASSERT_TRUE((*cluster)->Init(layout, std::vector<float>(layout.total_elements(), 1.0f)).ok());

  const std::string log = dir.path() + "/python.log";
  const int code = RunPython(
      {SPOTPS_SOURCE_DIR "/tests/client/python_security_check.py", "--ps=" + (*shards)->addresses(),
       "--ca=" + certs->ca, "--cert=" + certs->client_cert, "--key=" + certs->client_key,
       "--reader_token=" + dir.path() + "/reader.token",
       "--trainer_token=" + dir.path() + "/trainer.token"},
      log);
  ASSERT_EQ(code, 0) << ReadLog(log);
  // Only the trainer's push was applied.
  auto stats = (*cluster)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ((*stats)[0].global_step(), 1u);
}

}  // namespace
}  // namespace spotps
