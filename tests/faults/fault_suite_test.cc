// The fault suite: network partitions on the namespace harness,
// gray failures (SIGSTOP), a full checkpoint disk, a corrupt newest
// checkpoint and push ids across a kill -9. Each scenario asserts what
// survives: every unit committed once, nothing applied twice. main() prints
//   faults: scenarios=N passed=N units_lost=0 double_applied=0
// after gtest's output, as the last line. Needs root (namespaces, tmpfs).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "common/atomic_file.h"
#include "ps/checkpoint/checkpoint_directory.h"
#include "tests/support/child_process.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/hosted_job.h"
#include "tests/support/log_fields.h"
#include "tests/support/network_hosts.h"
#include "tests/support/training_job.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;
using testing::JsonSum;
using testing::JsonValues;
using testing::LocalShardCluster;
using testing::LogTails;
using testing::NetworkHosts;
using testing::TempDir;

// Figures gathered from the scenarios for the summary line.
int64_t units_lost = 0;
int64_t double_applied = 0;

// ---------------------------------------------------------------------------
// Partitions: 2 shards and 2 trainers, each in its own network namespace.
// ---------------------------------------------------------------------------

constexpr int kShards = 2, kTrainers = 2, kPort = 7000;

struct PartitionResult {
  std::string status_json;  // spotps-ctl status --json at the end.
  int64_t committed = 0, duplicated = 0, reissued = 0, units = 0, pushed = 0;
};

class PartitionTest : public ::testing::Test {
 protected:
  // Runs a 1-epoch job; once `committed_before_cut` units are committed,
  // takes host `cut`'s link down for `cut_for`, then up again. `durable`:
  // checkpoint rounds every 2 s. Fills `result`.
  void RunJob(int cut, absl::Duration cut_for, bool durable, int units, PartitionResult* result);

  // Checkpoint rounds shard 0 has logged as written by every shard.
  int RoundsWritten() const;
  // Waits (up to 30 s) until more than `before` rounds are written.
  void WaitForRoundAfter(int before) const;

  TempDir dir_;
  std::unique_ptr<NetworkHosts> hosts_;
};

int PartitionTest::RoundsWritten() const {
  absl::StatusOr<std::string> log = ReadFile(dir_.path() + "/shard0.log");
  if (!log.ok()) return 0;
  int rounds = 0;
  for (size_t at = log->find("written by 2 shards"); at != std::string::npos;
       at = log->find("written by 2 shards", at + 1)) {
    ++rounds;
  }
  return rounds;
}

void PartitionTest::WaitForRoundAfter(int before) const {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (RoundsWritten() <= before && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(200));
  }
}

void PartitionTest::RunJob(int cut, absl::Duration cut_for, bool durable, int units,
                           PartitionResult* result) {
  const std::string dir = dir_.path();
  std::vector<testing::HostSpec> specs;
  for (int i = 0; i < kShards; ++i) specs.push_back({absl::StrCat("shard", i), 0});
  for (int i = 0; i < kTrainers; ++i) specs.push_back({absl::StrCat("trainer", i), 0});
  auto made = NetworkHosts::Create(specs);
  ASSERT_TRUE(made.ok()) << made.status();
  hosts_ = *std::move(made);
  NetworkHosts& hosts = *hosts_;
  auto tokens = testing::MakeTokenFile(dir, 4000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();

  testing::HostedShards spec{kShards,
                             kPort,
                             {"--optimizer=adamw", "--lr=2e-3", "--warmup_steps=10"},
                             {"--epochs=1", absl::StrCat("--units_per_epoch=", units),
                              "--worker_lease_s=2", "--unit_lease_s=5"},
                             durable};
  if (durable) spec.coordinator_flags.push_back("--checkpoint_every_s=2");
  const std::string ps = absl::StrJoin(testing::HostedShardAddresses(hosts, spec), ",");
  auto shards = testing::StartHostedShards(hosts, dir, spec);
  ASSERT_TRUE(shards.ok()) << shards.status();
  std::vector<std::unique_ptr<ChildProcess>> trainers;
  for (int t = 0; t < kTrainers; ++t) {
    auto trainer = testing::StartHostedTrainer(hosts, dir, spec, t, *tokens,
                                               {"--rpc_deadline_s=3", "--ps_timeout_s=120"});
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    trainers.push_back(*std::move(trainer));
  }
  // spotps-ctl from a host that stays connected to shard 0.
  const int observer = cut == kShards ? kShards + 1 : kShards;
  auto status = [&]() {
    return hosts.Run(observer,
                     {BinaryPath("spotps-ctl"), "--ps=" + ps, "status", "--json", "--sample_s=0"});
  };
  // Wait until the job is under way, every trainer in it, then cut: a
  // trainer still starting up holds no unit to re-issue.
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  int64_t committed = 0;
  int trainers_committing = 0;
  while (absl::Now() < give_up && (committed < units / 4 || trainers_committing < kTrainers)) {
    absl::SleepFor(absl::Milliseconds(300));
    auto s = status();
    if (!s.ok()) continue;
    committed = JsonSum(*s, "committed");
    const std::vector<int64_t> per_trainer = JsonValues(*s, "units_committed");
    trainers_committing = static_cast<int>(
        std::count_if(per_trainer.begin(), per_trainer.end(), [](int64_t n) { return n > 0; }));
  }
  ASSERT_GE(committed, units / 4) << LogTails(dir);
  ASSERT_EQ(trainers_committing, kTrainers) << LogTails(dir);
  ASSERT_TRUE(hosts.Run(cut, {"ip", "link", "set", "eth0", "down"}).ok());
  absl::SleepFor(cut_for);
  ASSERT_TRUE(hosts.Run(cut, {"ip", "link", "set", "eth0", "up"}).ok());
  const int rounds_at_heal = RoundsWritten();

  // Units whose first commit a trainer made, and gradients it pushed (each
  // push id once, however often it was retried).
  int64_t units_trained = 0, pushed = 0;
  for (int t = 0; t < kTrainers; ++t) {
    auto code = trainers[t]->Wait(absl::Seconds(240));
    ASSERT_TRUE(code.ok()) << code.status() << LogTails(dir);
    const std::string log = *ReadFile(absl::StrCat(dir, "/trainer", t, ".log"));
    ASSERT_EQ(*code, 0) << log;
    EXPECT_EQ(testing::LogField(log, "job_done"), 1) << log;
    units_trained += static_cast<int64_t>(testing::LogField(log, "units"));
    pushed +=
        static_cast<int64_t>(testing::LogField(log, "steps") - testing::LogField(log, "dropped"));
  }
  auto final_status = status();
  ASSERT_TRUE(final_status.ok()) << final_status.status();
  result->status_json = *final_status;
  EXPECT_NE(final_status->find("\"done\":true"), std::string::npos) << *final_status;
  result->units = units;
  result->committed = JsonSum(*final_status, "committed");
  result->duplicated = JsonSum(*final_status, "duplicated");
  result->reissued = JsonSum(*final_status, "reissued");
  units_lost += std::max<int64_t>(0, units - result->committed);
  EXPECT_EQ(result->committed, units) << *final_status << LogTails(dir);
  // A unit trained twice is counted as duplicated, never committed twice:
  // the trainers' first commits are at most the committed units (a commit
  // whose reply a partition cut off counts on the coordinator, not in the
  // trainer's summary).
  EXPECT_LE(units_trained, result->committed) << *final_status;
  // No shard applied a push id twice: each applied at most what was pushed.
  const std::regex applied_re("\"pushes_applied\":([0-9]+)");
  int shards_seen = 0;
  for (auto it = std::sregex_iterator(final_status->begin(), final_status->end(), applied_re);
       it != std::sregex_iterator(); ++it, ++shards_seen) {
    const int64_t applied = std::stoll((*it)[1]);
    EXPECT_LE(applied, pushed) << "shard " << shards_seen << "\n" << *final_status;
    if (applied > pushed) ++double_applied;
  }
  EXPECT_EQ(shards_seen, kShards);
  result->pushed = pushed;
  // A fast machine can finish the job before the first round after the heal;
  // rounds go on after the job, so wait for one to have succeeded since.
  if (durable) WaitForRoundAfter(rounds_at_heal);
  for (auto& s : *shards) s->Signal(SIGTERM);
  for (auto& s : *shards) {
    auto code = s->Wait(absl::Seconds(20));
    EXPECT_TRUE(code.ok()) << code.status();
  }
  std::cout << "faults: partition of host " << cut << " for " << cut_for
            << ": committed=" << result->committed << " duplicated=" << result->duplicated
            << " reissued=" << result->reissued << " pushed=" << result->pushed
            << " applied=" << JsonSum(*final_status, "pushes_applied") / kShards << std::endl;
}

// 1a: a trainer is cut off (mid-push or mid-step) past its leases; its
// units are re-issued, and when healed it reconnects and nothing counts twice.
TEST_F(PartitionTest, TrainerCutOffRejoinsAndNothingIsAppliedTwice) {
  PartitionResult r;
  RunJob(/*cut=*/kShards, absl::Seconds(8), /*durable=*/false, 150, &r);
  EXPECT_GT(r.reissued, 0) << r.status_json;
}

// 1b: shard 1 cut off from shard 0 while checkpoint rounds run every 2 s:
// a round in the cut fails (or waits, retrying, until the heal), later ones
// succeed, and the newest id both shards hold is readable and intact on each.
TEST_F(PartitionTest, CheckpointRoundsAcrossAPartitionNeverTear) {
  PartitionResult r;
  RunJob(/*cut=*/1, absl::Seconds(6), /*durable=*/true, 60, &r);
  // A round ran into the cut: it either failed (and a later one succeeded)
  // or its WriteCheckpoint to shard 1 was retried until the link came back,
  // so it took most of the cut.
  const std::string shard0_log = *ReadFile(dir_.path() + "/shard0.log");
  double slowest_round_s = 0;
  const std::regex written_re("written by 2 shards in ([0-9.]+) s");
  for (auto it = std::sregex_iterator(shard0_log.begin(), shard0_log.end(), written_re);
       it != std::sregex_iterator(); ++it) {
    slowest_round_s = std::max(slowest_round_s, std::stod((*it)[1]));
  }
  EXPECT_TRUE(shard0_log.find("checkpoint round failed") != std::string::npos ||
              slowest_round_s > 2.0)
      << shard0_log;
  EXPECT_GT(slowest_round_s, 0) << "no round succeeded\n" << shard0_log;
  auto dir0 = CheckpointDirectory::Open(dir_.path() + "/ckpt0", 0, 3);
  auto dir1 = CheckpointDirectory::Open(dir_.path() + "/ckpt1", 1, 3);
  ASSERT_TRUE(dir0.ok() && dir1.ok());
  auto ids0 = dir0->ListIds();
  auto ids1 = dir1->ListIds();
  ASSERT_TRUE(ids0.ok() && ids1.ok());
  uint64_t common = 0;
  for (uint64_t id : *ids0) {
    if (std::find(ids1->begin(), ids1->end(), id) != ids1->end()) common = std::max(common, id);
  }
  ASSERT_GT(common, 0u) << "no checkpoint id on both shards";
  auto newest0 = dir0->ReadNewest();
  auto newest1 = dir1->ReadNewest();
  ASSERT_TRUE(newest0.ok()) << newest0.status();
  ASSERT_TRUE(newest1.ok()) << newest1.status();
  EXPECT_TRUE(newest0->skipped.empty());
  EXPECT_TRUE(newest1->skipped.empty());
  // Shard 0 writes first, so it may hold one newer id; never shard 1.
  EXPECT_GE(newest0->id, common);
  EXPECT_EQ(newest1->id, common);
}

// 1c: shard 1 cut off from every trainer (and shard 0): trainers back off,
// retry and resume; nothing is lost.
TEST_F(PartitionTest, ShardCutOffFromTrainersLosesNothing) {
  PartitionResult r;
  RunJob(/*cut=*/1, absl::Seconds(10), /*durable=*/false, 60, &r);
}

// 1d: the coordinator's shard cut off: trainers keep their state, rejoin
// and finish the job.
TEST_F(PartitionTest, CoordinatorShardCutOffTrainersRejoin) {
  PartitionResult r;
  RunJob(/*cut=*/0, absl::Seconds(8), /*durable=*/false, 60, &r);
}

// ---------------------------------------------------------------------------
// Gray failures: SIGSTOP / SIGCONT.
// ---------------------------------------------------------------------------

constexpr int kJobUnits = 150;

void CheckAllCommitted(const v1::ProgressResponse& p, uint64_t* reissued, uint64_t* duplicated) {
  for (const auto& e : p.epochs()) {
    EXPECT_EQ(e.committed(), e.units()) << "epoch " << e.epoch();
    units_lost += static_cast<int64_t>(e.units() - std::min(e.units(), e.committed()));
    *reissued += e.reissued();
    *duplicated += e.duplicated();
  }
}

TEST(GrayFailureTest, StoppedShardPastTheDeadlineLosesNothing) {
  TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 4000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  testing::JobOptions options;
  options.epochs = 1;
  options.units_per_epoch = kJobUnits;
  options.trainer_flags = {"--rpc_deadline_s=2"};
  testing::TrainingJob job(dir.path() + "/job", *tokens, options);
  ASSERT_TRUE(job.StartShards(false).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(job.StartTrainer().ok());
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  uint64_t committed = 0;
  while (absl::Now() < give_up && committed < kJobUnits / 4) {
    absl::SleepFor(absl::Milliseconds(200));
    auto p = job.Progress();
    if (p.ok()) committed = p->epochs(0).committed();
  }
  ASSERT_GE(committed, kJobUnits / 4u) << LogTails(job.dir());
  job.shards().shard(1).Signal(SIGSTOP);
  absl::SleepFor(absl::Seconds(7));  // Past the trainers' 2 s deadline, and their leases.
  job.shards().shard(1).Signal(SIGCONT);
  auto done = job.WaitDone(absl::Seconds(180));
  ASSERT_TRUE(done.ok()) << done.status() << LogTails(job.dir());
  uint64_t reissued = 0, duplicated = 0;
  CheckAllCommitted(*done, &reissued, &duplicated);
  EXPECT_EQ(job.Shutdown(), 0) << LogTails(job.dir());
  std::cout << "faults: shard stopped 7 s: reissued=" << reissued << " duplicated=" << duplicated
            << std::endl;
}

// The coordinator's status of the worker named `name`, or null.
const v1::WorkerStatus* FindWorker(const v1::ProgressResponse& p, const std::string& name) {
  for (const auto& w : p.workers()) {
    if (w.name() == name) return &w;
  }
  return nullptr;
}

// True when the worker named `name` holds a granted, uncommitted unit. Its
// clock counts grants from the clock it joined at, so this holds for a worker
// that joined at clock 0 (the first to register) and released nothing.
bool HoldsAUnit(const v1::ProgressResponse& p, const std::string& name) {
  const v1::WorkerStatus* w = FindWorker(p, name);
  return w != nullptr && w->clock() > w->units_committed();
}

bool Registered(testing::TrainingJob& job, const std::string& name) {
  auto p = job.Progress();
  return p.ok() && FindWorker(*p, name) != nullptr;
}

// Stops trainer `index` (SIGSTOP) at a moment it holds a unit: one stopped
// between a commit and its next grant holds nothing to re-issue. The stop is
// checked after the fact (a commit already on the wire lands within the
// 300 ms) and retried with SIGCONT in between.
bool StopWhileHoldingAUnit(testing::TrainingJob& job, int index) {
  const std::string name = absl::StrCat("trainer-", index);
  for (int attempt = 0; attempt < 20; ++attempt) {
    auto before = job.Progress();
    if (!before.ok() || !HoldsAUnit(*before, name)) {
      absl::SleepFor(absl::Milliseconds(50));
      continue;
    }
    job.trainers()[index]->Signal(SIGSTOP);
    absl::SleepFor(absl::Milliseconds(300));
    auto after = job.Progress();
    if (after.ok() && HoldsAUnit(*after, name)) return true;
    job.trainers()[index]->Signal(SIGCONT);
  }
  return false;
}

TEST(GrayFailureTest, StoppedTrainerPastItsLeaseNeverCommitsTwice) {
  TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 4000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  testing::JobOptions options;
  options.epochs = 1;
  options.units_per_epoch = kJobUnits;
  testing::TrainingJob job(dir.path() + "/job", *tokens, options);
  ASSERT_TRUE(job.StartShards(false).ok());
  // Trainer 0 registers alone, at clock 0, so HoldsAUnit can read its clock.
  ASSERT_TRUE(job.StartTrainer().ok());
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  while (absl::Now() < give_up && !Registered(job, "trainer-0")) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(job.StartTrainer().ok());
  uint64_t committed = 0;
  while (absl::Now() < give_up && committed < kJobUnits / 4) {
    absl::SleepFor(absl::Milliseconds(200));
    auto p = job.Progress();
    if (p.ok()) committed = p->epochs(0).committed();
  }
  ASSERT_GE(committed, kJobUnits / 4u) << LogTails(job.dir());
  ASSERT_TRUE(StopWhileHoldingAUnit(job, 0)) << LogTails(job.dir());
  absl::SleepFor(absl::Seconds(9));  // Worker lease 2 s, unit lease 6 s.
  auto during = job.Progress();
  job.trainers()[0]->Signal(SIGCONT);
  ASSERT_TRUE(during.ok());
  EXPECT_GT(during->epochs(0).reissued(), 0u) << "the stopped trainer's unit was not re-issued";
  auto done = job.WaitDone(absl::Seconds(180));
  ASSERT_TRUE(done.ok()) << done.status() << LogTails(job.dir());
  uint64_t reissued = 0, duplicated = 0;
  CheckAllCommitted(*done, &reissued, &duplicated);
  EXPECT_GT(reissued, 0u);
  EXPECT_EQ(job.Shutdown(), 0) << LogTails(job.dir());
  // Trainers count only first commits: the late one, if any, is a counted
  // duplicate, so their units add up to exactly the committed ones.
  int64_t trained = 0;
  for (size_t t = 0; t < job.trainers().size(); ++t) {
    trained += static_cast<int64_t>(
        testing::LogField(*ReadFile(absl::StrCat(job.dir(), "/trainer", t, ".log")), "units"));
  }
  EXPECT_EQ(trained, kJobUnits) << LogTails(job.dir());
  std::cout << "faults: trainer stopped 9 s: reissued=" << reissued << " duplicated=" << duplicated
            << " trained=" << trained << std::endl;
}

// ---------------------------------------------------------------------------
// Shards with a small SGD model, for exact weight checks.
// ---------------------------------------------------------------------------

constexpr float kLr = 0.5f;  // A power of two: w0 - lr * g is exact.

float InitialWeight(int64_t i) { return static_cast<float>(i % 64) * 0.125f; }
float Gradient(int64_t i) { return static_cast<float>(i % 5) - 2.0f; }

class ShardFaultTest : public ::testing::Test {
 protected:
  void StartShards(const std::vector<int64_t>& shape) {
    auto shards = LocalShardCluster::Start(
        2,
        [&](int i, const std::string& addresses) {
          std::vector<std::string> f = {"--optimizer=sgd", "--lr=0.5",
                                        absl::StrCat("--checkpoint_dir=", dir_.path(), "/ckpt", i),
                                        "--keep_checkpoints=5"};
          if (i == 0) {
            f.insert(f.end(), {"--epochs=1", "--units_per_epoch=4",
                               "--peers=" + addresses.substr(addresses.find(',') + 1)});
          }
          return f;
        },
        dir_.path());
    ASSERT_TRUE(shards.ok()) << shards.status();
    shards_ = *std::move(shards);
    cluster_ = *Cluster::Connect(shards_->addresses());
    layout_ = *ModelLayout::Create({{"w", shape}});
    w0_.resize(layout_.total_elements());
    for (size_t i = 0; i < w0_.size(); ++i) w0_[i] = InitialWeight(i);
    ASSERT_TRUE(cluster_->Init(layout_, w0_).ok());
    coordinator_ = *CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", shards_->port(0)));
  }

  std::vector<float> Gradients() const {
    std::vector<float> g(layout_.total_elements());
    for (size_t i = 0; i < g.size(); ++i) g[i] = Gradient(i);
    return g;
  }

  WeightSnapshot Pull() {
    WeightSnapshot w;
    EXPECT_TRUE(cluster_->Pull(v1::DTYPE_FP32, &w).ok());
    return w;
  }

  absl::StatusOr<v1::StatsResponse> ShardStats(int i) {
    auto stats = cluster_->Stats();
    if (!stats.ok()) return stats.status();
    return (*stats)[i];
  }

  void KillAndRestart(int i) {
    shards_->shard(i).Signal(SIGKILL);
    ASSERT_TRUE(shards_->shard(i).Wait(absl::Seconds(10)).ok());
    absl::Status s = shards_->Restart(i);
    ASSERT_TRUE(s.ok()) << s << LogTails(dir_.path());
  }

  TempDir dir_;
  std::unique_ptr<LocalShardCluster> shards_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<CoordinatorClient> coordinator_;
  ModelLayout layout_;
  std::vector<float> w0_;
};

// 4: push X applied, checkpoint round, kill -9 both shards, restart them
// from the checkpoint, retry X: a duplicate, and the weights are exact.
TEST_F(ShardFaultTest, PushIdsSurviveKillAndRestart) {
  StartShards({64, 32});
  const WeightSnapshot before = Pull();
  const std::vector<float> g = Gradients();
  auto first = cluster_->Push(g, before.versions, v1::DTYPE_FP32, "fault-suite-push-x");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->duplicate);
  auto round = coordinator_->CheckpointNow();
  ASSERT_TRUE(round.ok()) << round.status();
  KillAndRestart(1);
  KillAndRestart(0);
  for (int i = 0; i < 2; ++i) {
    auto stats = ShardStats(i);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->restored_checkpoint_id(), round->checkpoint_id()) << "shard " << i;
  }
  auto retry = cluster_->Push(g, before.versions, v1::DTYPE_FP32, "fault-suite-push-x");
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->duplicate);
  const WeightSnapshot after = Pull();
  ASSERT_EQ(after.values.size(), w0_.size());
  int64_t wrong = 0;
  for (size_t i = 0; i < w0_.size(); ++i) wrong += after.values[i] != w0_[i] - kLr * g[i];
  EXPECT_EQ(wrong, 0);
  if (wrong != 0 || !retry->duplicate) ++double_applied;
}

// A tmpfs mounted on `path` for one test; unmounted (lazily, so open files
// cannot stop it) when it goes out of scope, whatever happened.
class TmpfsMount {
 public:
  TmpfsMount(const std::string& path, const std::string& size) : path_(path) {
    std::filesystem::create_directories(path);
    mounted_ = ::mount("tmpfs", path.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
    if (!mounted_) error_ = strerror(errno);
  }
  ~TmpfsMount() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string path_, error_;
  bool mounted_ = false;
};

// Writes zeros to `path` until the file system is full.
void FillDisk(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::vector<char> block(4096, 0);
  while (std::fwrite(block.data(), 1, block.size(), f) == block.size() && std::fflush(f) == 0) {
  }
  std::fclose(f);
}

// 3: shard 1's checkpoints on a small tmpfs that fills up.
TEST_F(ShardFaultTest, FullDiskFailsTheRoundAndKeepsServing) {
  const std::string ckpt1 = dir_.path() + "/ckpt1";
  TmpfsMount mount(ckpt1, "2m");  // Before the shards: unmounted after they died.
  ASSERT_TRUE(mount.mounted()) << "mount -t tmpfs: " << mount.error();
  StartShards({256, 256});  // 256 KiB of weights.
  auto first = coordinator_->CheckpointNow();
  ASSERT_TRUE(first.ok()) << first.status();
  FillDisk(ckpt1 + "/filler");

  auto failed = coordinator_->CheckpointNow();
  EXPECT_FALSE(failed.ok());
  auto stats = ShardStats(1);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_FALSE(stats->last_checkpoint_error().empty());
  EXPECT_GT(stats->last_checkpoint_error_unix_ms(), 0);
  EXPECT_EQ(stats->last_checkpoint_id(), first->checkpoint_id());
  for (const auto& entry : std::filesystem::directory_iterator(ckpt1)) {
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos)
        << "a failed write left " << entry.path();
  }
  std::cout << "faults: disk full: " << stats->last_checkpoint_error() << std::endl;
  // spotps-ctl shows it, in text and JSON.
  for (const bool json : {false, true}) {
    const std::string log = dir_.path() + (json ? "/ctl.json" : "/ctl.txt");
    std::vector<std::string> argv = {BinaryPath("spotps-ctl"), "--ps=" + shards_->addresses(),
                                     "status", "--sample_s=0"};
    if (json) argv.push_back("--json");
    auto ctl = ChildProcess::Start(argv, log);
    ASSERT_TRUE(ctl.ok());
    ASSERT_TRUE((*ctl)->Wait(absl::Seconds(30)).ok());
    const std::string out = *ReadFile(log);
    EXPECT_NE(out.find(json ? "\"last_checkpoint_error\":\"checkpoint "
                            : "checkpoint failed: shard 1 at "),
              std::string::npos)
        << out;
  }
  // It keeps serving pulls and pushes.
  const WeightSnapshot before = Pull();
  const std::vector<float> g = Gradients();
  auto pushed = cluster_->Push(g, before.versions, v1::DTYPE_FP32);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_FALSE(pushed->duplicate);
  const WeightSnapshot after = Pull();
  int64_t wrong = 0;
  for (size_t i = 0; i < w0_.size(); ++i) wrong += after.values[i] != w0_[i] - kLr * g[i];
  EXPECT_EQ(wrong, 0);
  if (wrong != 0) ++double_applied;
  // The previous checkpoint is intact and restorable.
  {
    auto files = CheckpointDirectory::Open(ckpt1, 1, 5);
    ASSERT_TRUE(files.ok()) << files.status();
    auto newest = files->ReadNewest();
    ASSERT_TRUE(newest.ok()) << newest.status();
    EXPECT_EQ(newest->id, first->checkpoint_id());
    EXPECT_TRUE(newest->skipped.empty());
  }
  // Space freed: the next round works and the error clears.
  std::filesystem::remove(ckpt1 + "/filler");
  auto next = coordinator_->CheckpointNow();
  ASSERT_TRUE(next.ok()) << next.status();
  stats = ShardStats(1);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->last_checkpoint_error(), "");
  EXPECT_EQ(stats->last_checkpoint_error_unix_ms(), 0);
  EXPECT_EQ(stats->last_checkpoint_id(), next->checkpoint_id());
  // And it restores: kill -9, restart, the weights are those after the push.
  KillAndRestart(1);
  stats = ShardStats(1);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->restored_checkpoint_id(), next->checkpoint_id());
  EXPECT_EQ(Pull().values, after.values);
  shards_.reset();  // Every shard gone before the mount goes.
}

// 3: a bit flip in the newest checkpoint and a truncated one before it:
// after kill -9 and restart the shard restores the last intact one, says so.
TEST_F(ShardFaultTest, CorruptNewestCheckpointFallsBackToThePreviousOne) {
  StartShards({64, 32});
  auto one = coordinator_->CheckpointNow();
  ASSERT_TRUE(one.ok()) << one.status();
  const WeightSnapshot at_one = Pull();
  const std::vector<float> g = Gradients();
  std::vector<uint64_t> ids;
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(cluster_->Push(g, Pull().versions, v1::DTYPE_FP32).ok());
    auto r = coordinator_->CheckpointNow();
    ASSERT_TRUE(r.ok()) << r.status();
    ids.push_back(r->checkpoint_id());
  }
  shards_->shard(1).Signal(SIGKILL);
  ASSERT_TRUE(shards_->shard(1).Wait(absl::Seconds(10)).ok());
  auto files = CheckpointDirectory::Open(dir_.path() + "/ckpt1", 1, 5);
  ASSERT_TRUE(files.ok());
  {  // Newest: one bit flipped in the middle.
    const std::string path = files->PathOf(ids[1]);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    const auto size = std::filesystem::file_size(path);
    f.seekg(size / 2);
    char c = 0;
    f.get(c);
    f.seekp(size / 2);
    f.put(static_cast<char>(c ^ 0x10));
  }
  // The one before: truncated.
  std::filesystem::resize_file(files->PathOf(ids[0]),
                               std::filesystem::file_size(files->PathOf(ids[0])) / 3);
  ASSERT_TRUE(shards_->Restart(1).ok()) << LogTails(dir_.path());
  auto stats = ShardStats(1);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->restored_checkpoint_id(), one->checkpoint_id());
  const std::string log = *ReadFile(dir_.path() + "/shard1.log");
  for (uint64_t id : ids) {
    EXPECT_NE(log.find("skipped checkpoint " + files->PathOf(id)), std::string::npos)
        << "no message for checkpoint " << id << ":\n"
        << log;
  }
  // Shard 1's partitions are back at checkpoint one's weights: every value
  // equals either that (shard 1) or two pushes later (shard 0), exactly.
  const WeightSnapshot now = Pull();
  int64_t back = 0, wrong = 0;
  for (size_t i = 0; i < w0_.size(); ++i) {
    if (now.values[i] == at_one.values[i]) {
      ++back;
    } else if (now.values[i] != at_one.values[i] - 2 * kLr * g[i]) {
      ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_GT(back, 0);
}

}  // namespace
}  // namespace spotps

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  std::printf("faults: scenarios=%d passed=%d units_lost=%lld double_applied=%lld\n",
              u.test_to_run_count(), u.successful_test_count(),
              static_cast<long long>(spotps::units_lost),
              static_cast<long long>(spotps::double_applied));
  return result;
}
