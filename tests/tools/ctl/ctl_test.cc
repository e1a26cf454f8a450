// spotps-ctl against real spotps-ps processes: what it prints, and its exit
// status (0 ok, 1 the cluster failed or refused, 2 bad usage).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/log_fields.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;
using testing::LocalShardCluster;
using testing::LogField;

constexpr int kPushes = 3;
constexpr int kUnits = 10;

struct CtlResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr.
};

// The cells of one row of a table that spotps-ctl printed, keyed by the
// column headers: the table is the one whose header starts with
// `first_header`, the row the one whose first cell is `first_cell`.
std::map<std::string, std::string> TableRow(const std::string& output,
                                            const std::string& first_header,
                                            const std::string& first_cell) {
  std::vector<std::string> header;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cells.empty()) continue;
    if (cells[0] == first_header) {
      header = cells;
    } else if (!header.empty() && cells[0] == first_cell && cells.size() == header.size()) {
      std::map<std::string, std::string> row;
      for (size_t i = 0; i < cells.size(); ++i) row[header[i]] = cells[i];
      return row;
    }
  }
  return {};
}

// The JSON object spotps-ctl --json printed: its one line that starts with '{'.
std::string JsonLine(const std::string& output) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StartsWith(line, "{")) return std::string(line);
  }
  return "";
}

// A model of 4 x 64 Ki elements: several partitions on each of 2 shards.
absl::Status InitModel(Cluster& cluster) {
  absl::StatusOr<ModelLayout> layout = ModelLayout::Create(
      {{"a", {64, 1024}}, {"b", {64, 1024}}, {"c", {64, 1024}}, {"d", {64, 1024}}});
  if (!layout.ok()) return layout.status();
  std::vector<float> values(layout->total_elements(), 0.5f);
  return cluster.Init(*layout, values).status();
}

absl::Status PushOnce(Cluster& cluster) {
  WeightSnapshot w;
  if (absl::Status s = cluster.Pull(v1::DTYPE_FP32, &w); !s.ok()) return s;
  std::vector<float> gradient(w.values.size(), 0.01f);
  return cluster.Push(gradient, w.versions, v1::DTYPE_FP32).status();
}

class CtlTest : public ::testing::Test {
 protected:
  // Shards with a model and kPushes gradients applied.
  std::unique_ptr<LocalShardCluster> StartTrainedShards(int num_shards,
                                                        const std::vector<std::string>& flags) {
    auto shards = LocalShardCluster::Start(num_shards, flags, dir_.path());
    EXPECT_TRUE(shards.ok()) << shards.status();
    if (!shards.ok()) return nullptr;
    auto cluster = Cluster::Connect((*shards)->addresses());
    EXPECT_TRUE(cluster.ok()) << cluster.status();
    EXPECT_TRUE(InitModel(**cluster).ok());
    for (int i = 0; i < kPushes; ++i) EXPECT_TRUE(PushOnce(**cluster).ok());
    return *std::move(shards);
  }

  std::unique_ptr<ChildProcess> StartCtl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {BinaryPath("spotps-ctl")};
    argv.insert(argv.end(), args.begin(), args.end());
    last_log_ = absl::StrCat(dir_.path(), "/ctl", runs_++, ".log");
    auto child = ChildProcess::Start(argv, last_log_);
    EXPECT_TRUE(child.ok()) << child.status();
    return child.ok() ? *std::move(child) : nullptr;
  }

  CtlResult Finish(ChildProcess& ctl) {
    CtlResult r;
    absl::StatusOr<int> code = ctl.Wait(absl::Seconds(60));
    EXPECT_TRUE(code.ok()) << code.status();
    r.exit_code = code.ok() ? *code : -1;
    r.output = ReadFile(last_log_).value_or("");
    return r;
  }

  CtlResult RunCtl(const std::vector<std::string>& args) {
    std::unique_ptr<ChildProcess> ctl = StartCtl(args);
    return ctl != nullptr ? Finish(*ctl) : CtlResult{};
  }

  testing::TempDir dir_;
  int runs_ = 0;
  std::string last_log_;
};

TEST_F(CtlTest, StatusShowsEveryShardWithItsGlobalStep) {
  auto shards = StartTrainedShards(2, {"--optimizer=sgd", "--lr=0.1"});
  ASSERT_NE(shards, nullptr);
  const CtlResult r = RunCtl({"--ps=" + shards->addresses(), "--sample_s=0", "status"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int i = 0; i < 2; ++i) {
    std::map<std::string, std::string> row = TableRow(r.output, "shard", absl::StrCat(i));
    ASSERT_FALSE(row.empty()) << r.output;
    EXPECT_EQ(row["address"], absl::StrCat("127.0.0.1:", shards->port(i)));
    EXPECT_EQ(row["init"], "yes");
    EXPECT_EQ(row["global_step"], absl::StrCat(kPushes));
    EXPECT_EQ(row["applied"], absl::StrCat(kPushes));
    EXPECT_EQ(row["pver_max"], absl::StrCat(kPushes));
    EXPECT_EQ(row["lr"], "0.1");
  }
  EXPECT_TRUE(absl::StrContains(r.output, "coordinator: none")) << r.output;
  EXPECT_FALSE(absl::StrContains(r.output, "warning:")) << r.output;
}

TEST_F(CtlTest, JsonCarriesTheSameNumbers) {
  auto shards = StartTrainedShards(2, {"--optimizer=sgd", "--lr=0.1"});
  ASSERT_NE(shards, nullptr);
  const CtlResult r = RunCtl({"--ps=" + shards->addresses(), "--sample_s=0", "--json", "status"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string json = JsonLine(r.output);
  ASSERT_FALSE(json.empty()) << r.output;
  EXPECT_EQ(json.back(), '}');
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(absl::StrContains(
        json, absl::StrCat("{\"index\":", i, ",\"address\":\"127.0.0.1:", shards->port(i),
                           "\",\"initialized\":true,\"shard_index\":", i,
                           ",\"num_shards\":2,\"global_step\":", kPushes,
                           ",\"pushes_applied\":", kPushes, ",")))
        << json;
  }
  EXPECT_TRUE(absl::StrContains(json, absl::StrCat("\"partition_version_max\":", kPushes))) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"throughput\":null")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"coordinator\":{\"present\":false,\"error\":null}"))
      << json;
}

TEST_F(CtlTest, ThroughputCountsThePushesBetweenTwoSamples) {
  // Pushes applied on arrival: under the default `fresh` the shards still
  // count the client that trained them as live (10 s after its last push),
  // so each of this pusher's pushes waited out --average_wait_ms for it and
  // a 1 s sample often saw no update at all.
  auto shards = StartTrainedShards(2, {"--optimizer=sgd", "--lr=0.1", "--staleness_method=none"});
  ASSERT_NE(shards, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> pushes{0};
  std::thread pusher([&] {
    auto cluster = Cluster::Connect(shards->addresses());
    ASSERT_TRUE(cluster.ok() && (*cluster)->FetchLayout().ok());
    while (!stop) {
      EXPECT_TRUE(PushOnce(**cluster).ok());
      ++pushes;
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  // Sample only once pushes flow: under a loaded CI run the pusher's
  // connect once took longer than the whole 1 s sample.
  for (int i = 0; i < 3000 && pushes < 2; ++i) absl::SleepFor(absl::Milliseconds(10));
  if (pushes < 2) {
    stop = true;
    pusher.join();
    FAIL() << "the pusher made " << pushes << " pushes in 30 s";
  }
  const CtlResult r =
      RunCtl({"--ps=" + shards->addresses(), "--sample_s=1", "--tokens_per_push=1000", "status"});
  stop = true;
  pusher.join();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double pushes_per_s = LogField(r.output, "pushes_per_s");
  // At least one push between the samples; how many depends on the host's
  // load (one push in 1.01 s, 0.99/s, under a loaded CI run).
  EXPECT_GT(pushes_per_s, 0) << r.output;
  EXPECT_NEAR(LogField(r.output, "tokens_per_s"), 1000 * pushes_per_s, 10) << r.output;
}

TEST_F(CtlTest, UnreachableClusterExits1WithAClearMessage) {
  const CtlResult r = RunCtl({"--ps=127.0.0.1:1", "--sample_s=0", "status"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "cannot read the cluster's status")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "127.0.0.1:1")) << r.output;
}

TEST_F(CtlTest, BadUsageExits2) {
  const std::vector<std::vector<std::string>> cases = {
      {"--ps=127.0.0.1:1", "frobnicate"},           // Unknown command.
      {"status"},                                   // No --ps.
      {"--ps=127.0.0.1:1"},                         // No command.
      {"--ps=127.0.0.1:1", "--bogus=1", "status"},  // Unknown flag.
      {"--ps=127.0.0.1:1", "--sample_s=soon", "status"},
      {"--ps=127.0.0.1:1", "status", "checkpoint"},
  };
  for (const auto& args : cases) {
    const CtlResult r = RunCtl(args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(absl::StartsWith(r.output, "spotps-ctl: ")) << r.output;
  }
  EXPECT_TRUE(absl::StrContains(RunCtl({"--ps=127.0.0.1:1", "frobnicate"}).output,
                                "unknown command 'frobnicate'"));
  const CtlResult help = RunCtl({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(help.output, "usage: spotps-ctl")) << help.output;
}

TEST_F(CtlTest, CommandsThatNeedACoordinatorFailWithoutOne) {
  auto shards = StartTrainedShards(2, {"--optimizer=sgd", "--lr=0.1"});
  ASSERT_NE(shards, nullptr);
  const CtlResult checkpoint = RunCtl({"--ps=" + shards->addresses(), "checkpoint"});
  EXPECT_EQ(checkpoint.exit_code, 1) << checkpoint.output;
  EXPECT_TRUE(absl::StrContains(checkpoint.output, "does not implement Coordinator.CheckpointNow"))
      << checkpoint.output;
  const CtlResult wait = RunCtl({"--ps=" + shards->addresses(), "wait-done"});
  EXPECT_EQ(wait.exit_code, 1) << wait.output;
  EXPECT_TRUE(absl::StrContains(wait.output, "hosts no coordinator")) << wait.output;
}

TEST_F(CtlTest, StatusNamesLocalModeWithItsSteps) {
  auto shards =
      StartTrainedShards(1, {"--consistency=local:8", "--epochs=1", "--units_per_epoch=4"});
  ASSERT_NE(shards, nullptr);
  const CtlResult r = RunCtl({"--ps=" + shards->addresses(), "--sample_s=0", "status"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "consistency=local:8")) << r.output;
  // One client pushed (StartTrainedShards), back to back: its rounds are
  // shorter than --average_wait_ms, which is the wait in force.
  EXPECT_TRUE(absl::StrContains(
      r.output, "averaging: shard 0 target=1 live_pushers=1 wait_ms=1000 waited_out=0\n"))
      << r.output;
  const std::string json =
      JsonLine(RunCtl({"--ps=" + shards->addresses(), "--sample_s=0", "--json", "status"}).output);
  EXPECT_TRUE(absl::StrContains(json,
                                "\"live_pushers\":1,\"average_target\":1,"
                                "\"average_wait_ms\":1000,\"averaged_updates_waited_out\":0}"))
      << json;
}

TEST_F(CtlTest, StatusSaysHowManyTrainersTheJobStillWaitsFor) {
  auto shards = StartTrainedShards(1, {"--epochs=1", "--units_per_epoch=4", "--min_workers=3"});
  ASSERT_NE(shards, nullptr);
  auto coordinator = CoordinatorClient::Connect(shards->addresses());
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  ASSERT_TRUE((*coordinator)->Register("first").ok());
  const CtlResult r = RunCtl({"--ps=" + shards->addresses(), "--sample_s=0", "status"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "workers: live=1 expired=0 to_start=2\n")) << r.output;
  const std::string json =
      JsonLine(RunCtl({"--ps=" + shards->addresses(), "--sample_s=0", "--json", "status"}).output);
  EXPECT_TRUE(absl::StrContains(json, "\"workers_to_start\":2,")) << json;
}

// One shard that hosts a coordinator for 1 epoch of kUnits units, with one
// registered worker (only shard 0 may host it, so a 1-shard cluster).
class CtlCoordinatorTest : public CtlTest {
 protected:
  void SetUp() override {
    shards_ = StartTrainedShards(
        1, {"--optimizer=sgd", "--lr=0.1", "--epochs=1", absl::StrCat("--units_per_epoch=", kUnits),
            "--checkpoint_dir=" + dir_.path() + "/ckpt"});
    ASSERT_NE(shards_, nullptr);
    auto coordinator = CoordinatorClient::Connect(shards_->addresses());
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = *std::move(coordinator);
    auto registered = coordinator_->Register("ctl-test-worker");
    ASSERT_TRUE(registered.ok()) << registered.status();
    worker_id_ = registered->worker_id();
  }

  void CommitUnits(int n) {
    for (int i = 0; i < n; ++i) {
      auto unit = coordinator_->Acquire(worker_id_);
      ASSERT_TRUE(unit.ok()) << unit.status();
      ASSERT_EQ(unit->outcome(), v1::AcquireUnitResponse::OUTCOME_UNIT);
      ASSERT_TRUE(
          coordinator_->Commit(worker_id_, unit->unit().epoch(), unit->unit().index()).ok());
    }
  }

  std::unique_ptr<LocalShardCluster> shards_;
  std::unique_ptr<CoordinatorClient> coordinator_;
  uint64_t worker_id_ = 0;
};

TEST_F(CtlCoordinatorTest, StatusListsTheWorkerAndTheEpochProgress) {
  CommitUnits(2);
  const CtlResult r = RunCtl({"--ps=" + shards_->addresses(), "--sample_s=0", "status"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(TableRow(r.output, "shard", "0")["global_step"], absl::StrCat(kPushes)) << r.output;
  EXPECT_TRUE(absl::StrContains(
      r.output, "coordinator: current_epoch=0 num_epochs=1 done=no consistency=async"))
      << r.output;
  EXPECT_FALSE(absl::StrContains(r.output, "sync rounds:")) << r.output;
  std::map<std::string, std::string> epoch = TableRow(r.output, "epoch", "0");
  EXPECT_EQ(epoch["units"], absl::StrCat(kUnits)) << r.output;
  EXPECT_EQ(epoch["committed"], "2") << r.output;
  EXPECT_EQ(epoch["leased"], "0") << r.output;
  std::map<std::string, std::string> worker =
      TableRow(r.output, "worker_id", absl::StrCat(worker_id_));
  EXPECT_EQ(worker["name"], "ctl-test-worker") << r.output;
  EXPECT_EQ(worker["units_committed"], "2") << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "workers: live=1 expired=0")) << r.output;

  const std::string json =
      JsonLine(RunCtl({"--ps=" + shards_->addresses(), "--sample_s=0", "--json", "status"}).output);
  EXPECT_TRUE(absl::StrContains(
      json, absl::StrCat("\"epochs\":[{\"epoch\":0,\"units\":", kUnits, ",\"committed\":2,")))
      << json;
  EXPECT_TRUE(absl::StrContains(json, absl::StrCat("\"workers\":[{\"worker_id\":", worker_id_,
                                                   ",\"name\":\"ctl-test-worker\","
                                                   "\"units_committed\":2,")))
      << json;
  EXPECT_TRUE(absl::StrContains(json, "\"workers_expired\":0}")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"consistency\":\"async\"")) << json;
}

TEST_F(CtlCoordinatorTest, WaitDoneWaitsForTheLastUnit) {
  CommitUnits(kUnits - 1);
  const CtlResult early = RunCtl({"--ps=" + shards_->addresses(), "--timeout_s=1", "wait-done"});
  EXPECT_EQ(early.exit_code, 1) << early.output;
  EXPECT_TRUE(absl::StrContains(early.output, "not done after")) << early.output;

  std::unique_ptr<ChildProcess> waiter =
      StartCtl({"--ps=" + shards_->addresses(), "--print_every_s=0.2", "wait-done"});
  ASSERT_NE(waiter, nullptr);
  absl::SleepFor(absl::Seconds(1.5));
  ASSERT_TRUE(waiter->running());
  CommitUnits(1);
  const CtlResult r = Finish(*waiter);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(
      r.output, absl::StrCat("progress: epoch=1/1 committed=", kUnits - 1, "/", kUnits)))
      << r.output;
  EXPECT_TRUE(absl::StrContains(
      r.output, absl::StrCat("done: epoch=1/1 committed=", kUnits, "/", kUnits, " (100.0%)")))
      << r.output;
}

// The server side of CheckpointNow may not exist yet: then the answer must
// be a clear refusal, never a crash or a hang.
TEST_F(CtlCoordinatorTest, CheckpointWritesARoundAndStatusShowsIt) {
  const CtlResult first = RunCtl({"--ps=" + shards_->addresses(), "checkpoint"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(LogField(first.output, "id"), 1) << first.output;
  const CtlResult second = RunCtl({"--ps=" + shards_->addresses(), "checkpoint"});
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(LogField(second.output, "id"), 2) << second.output;  // Ids only grow.
  const CtlResult status = RunCtl({"--ps=" + shards_->addresses(), "status", "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.output;
  EXPECT_TRUE(absl::StrContains(status.output, "\"last_checkpoint_id\":2")) << status.output;
}

}  // namespace
}  // namespace spotps
