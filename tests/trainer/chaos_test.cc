// Chaos: 2 shards and 3 trainers train the tiny model for 2 epochs while a
// driver kill -9s random trainers (starting replacements), SIGTERMs one, and
// kill -9s shard 1 once and restarts it from its checkpoint. No unit may be
// lost, and the model must end up about as good as a calm run's.
#include <dirent.h>
#include <sys/stat.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/atomic_file.h"
#include "client/cluster.h"
#include "client/coordinator_client.h"
#include "tests/support/child_process.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/log_fields.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;
using testing::LocalShardCluster;
using testing::LogField;

constexpr int kEpochs = 2;
constexpr int kUnits = 200;
constexpr int kTrainers = 3;

// The figures line, printed by main() after gtest's own output so that it
// is the last line of the run.
std::string chaos_line;

// One training job: shards, trainers, and the files they leave in `dir`.
class Job {
 public:
  Job(std::string dir, std::string tokens) : dir_(std::move(dir)), tokens_(std::move(tokens)) {}

  absl::Status StartShards(bool durable) {
    auto shards = LocalShardCluster::Start(
        2,
        [&](int i, const std::string& addresses) {
          std::vector<std::string> f = {"--optimizer=adamw", "--lr=2e-3", "--warmup_steps=10"};
          if (durable) f.push_back(absl::StrCat("--checkpoint_dir=", dir_, "/ckpt", i));
          if (i == 0) {  // Shard 0 coordinates and drives checkpoint rounds.
            f.insert(f.end(), {absl::StrCat("--epochs=", kEpochs),
                               absl::StrCat("--units_per_epoch=", kUnits), "--worker_lease_s=2",
                               "--unit_lease_s=6",
                               "--peers=" + addresses.substr(addresses.find(',') + 1)});
            if (durable) f.push_back("--checkpoint_every_s=2");
          }
          return f;
        },
        dir_);
    if (!shards.ok()) return shards.status();
    shards_ = *std::move(shards);
    coordinator_ = *CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", shards_->port(0)));
    return absl::OkStatus();
  }

  void StartTrainer() {
    const int index = static_cast<int>(trainers_.size());
    auto t = ChildProcess::Start(
        {BinaryPath("spotps-trainer"), "--ps=" + shards_->addresses(), "--model=tiny",
         "--data=" + tokens_, "--batch=8", "--seq_len=64", "--threads=1",
         absl::StrCat("--worker_index=", index), "--log_every=20", "--eval_batches=0"},
        absl::StrCat(dir_, "/trainer", index, ".log"));
    ASSERT_TRUE(t.ok());
    trainers_.push_back(*std::move(t));
  }

  // Indices of trainers still running.
  std::vector<int> Running() {
    std::vector<int> alive;
    for (size_t i = 0; i < trainers_.size(); ++i) {
      if (trainers_[i]->running()) alive.push_back(static_cast<int>(i));
    }
    return alive;
  }

  absl::StatusOr<v1::ProgressResponse> Progress() { return coordinator_->Progress(); }

  absl::StatusOr<v1::ProgressResponse> WaitDone(absl::Duration timeout) {
    const absl::Time give_up = absl::Now() + timeout;
    while (absl::Now() < give_up) {
      auto p = coordinator_->Progress();
      if (p.ok() && p->done()) return p;
      absl::SleepFor(absl::Milliseconds(200));
    }
    return absl::DeadlineExceededError("the job did not finish in time");
  }

  // Validation loss of the final weights, read through the client library.
  absl::StatusOr<double> ValLoss() {
    const std::string log = dir_ + "/generate.log";
    auto gen = ChildProcess::Start(
        {BinaryPath("spotps-generate"), "--ps=" + shards_->addresses(), "--model=tiny",
         "--data=" + tokens_, "--batch=8", "--seq_len=64", "--eval_batches=24", "--tokens=1",
         "--threads=1"},
        log);
    if (!gen.ok()) return gen.status();
    auto code = (*gen)->Wait(absl::Seconds(120));
    if (!code.ok() || *code != 0) return absl::InternalError(*ReadFile(log));
    return LogField(*ReadFile(log), "val_loss");
  }

  // Trainers leave by themselves when the job is done; then stop the shards.
  // Returns how many processes had to be killed.
  int Shutdown() {
    int killed = 0;
    for (auto& t : trainers_) {
      if (!t->Wait(absl::Seconds(60)).ok()) {
        t->Signal(SIGKILL);
        ++killed;
      }
    }
    for (int i = 0; i < 2; ++i) {
      shards_->shard(i).Signal(SIGTERM);
      if (!shards_->shard(i).Wait(absl::Seconds(20)).ok()) ++killed;
    }
    return killed;
  }

  std::vector<std::unique_ptr<ChildProcess>>& trainers() { return trainers_; }
  LocalShardCluster& shards() { return *shards_; }

 private:
  std::string dir_, tokens_;
  std::unique_ptr<LocalShardCluster> shards_;
  std::unique_ptr<CoordinatorClient> coordinator_;
  std::vector<std::unique_ptr<ChildProcess>> trainers_;
};

// The last lines of every log in `dir`, for failure messages.
std::string LogTails(const std::string& dir) {
  std::string out;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = d != nullptr ? readdir(d) : nullptr) {
    const std::string name = e->d_name;
    if (name.size() < 4 || name.substr(name.size() - 4) != ".log") continue;
    absl::StatusOr<std::string> text = ReadFile(dir + "/" + name);
    if (!text.ok()) continue;
    const size_t from = text->size() > 400 ? text->size() - 400 : 0;
    absl::StrAppend(&out, "\n== ", name, "\n", text->substr(from));
  }
  if (d != nullptr) closedir(d);
  return out;
}

// Processes whose command line mentions `marker` (our temp dir).
int ProcessesMentioning(const std::string& marker) {
  int found = 0;
  DIR* proc = opendir("/proc");
  while (dirent* e = proc != nullptr ? readdir(proc) : nullptr) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream cmdline(absl::StrCat("/proc/", e->d_name, "/cmdline"));
    std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    if (text.find(marker) != std::string::npos) ++found;
  }
  if (proc != nullptr) closedir(proc);
  return found;
}

TEST(ChaosTest, PreemptionsAndAShardCrashLoseNothing) {
  testing::TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 8000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();

  // Baseline: the same job without chaos.
  Job calm(dir.path() + "/calm", *tokens);
  ASSERT_EQ(::mkdir((dir.path() + "/calm").c_str(), 0755), 0);
  ASSERT_TRUE(calm.StartShards(false).ok());
  for (int i = 0; i < kTrainers; ++i) calm.StartTrainer();
  ASSERT_TRUE(calm.WaitDone(absl::Seconds(150)).ok()) << "see " << dir.path();
  auto baseline = calm.ValLoss();
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  EXPECT_EQ(calm.Shutdown(), 0);

  Job chaos(dir.path() + "/chaos", *tokens);
  ASSERT_EQ(::mkdir((dir.path() + "/chaos").c_str(), 0755), 0);
  ASSERT_TRUE(chaos.StartShards(true).ok());
  for (int i = 0; i < kTrainers; ++i) chaos.StartTrainer();
  std::mt19937 rng(2026);
  bool sent_sigterm = false, crashed_shard = false;
  int kills = 0;
  const absl::Time give_up = absl::Now() + absl::Seconds(180);
  auto progress = chaos.Progress();
  while (absl::Now() < give_up && !(progress.ok() && progress->done())) {
    absl::SleepFor(absl::Milliseconds(1500 + rng() % 1000));
    progress = chaos.Progress();
    if (progress.ok() && progress->done()) break;
    std::vector<int> alive = chaos.Running();
    const uint64_t committed = progress.ok() ? progress->epochs(0).committed() : 0;
    if (!crashed_shard && committed >= kUnits / 2) {
      // Shard 1 dies once it has a checkpoint, and comes back from it.
      auto stats = (*Cluster::Connect(chaos.shards().addresses()))->Stats();
      if (stats.ok() && (*stats)[1].last_checkpoint_id() > 0) {
        chaos.shards().shard(1).Signal(SIGKILL);
        ASSERT_TRUE(chaos.shards().shard(1).Wait(absl::Seconds(10)).ok());
        absl::SleepFor(absl::Seconds(1));
        absl::Status restarted = chaos.shards().Restart(1);
        ASSERT_TRUE(restarted.ok()) << restarted << LogTails(dir.path() + "/chaos");
        crashed_shard = true;
        continue;
      }
    }
    if (alive.empty()) {
      chaos.StartTrainer();
      continue;
    }
    int victim = alive[rng() % alive.size()];
    if (!sent_sigterm && kills >= 2) {
      victim = alive.front();  // The longest-running one: surely past start-up.
      chaos.trainers()[victim]->Signal(SIGTERM);  // A graceful preemption.
      sent_sigterm = true;
      auto code = chaos.trainers()[victim]->Wait(absl::Seconds(30));
      ASSERT_TRUE(code.ok());
      EXPECT_EQ(*code, 0) << "a drained trainer exits 0" << LogTails(dir.path() + "/chaos");
    } else {
      chaos.trainers()[victim]->Signal(SIGKILL);
      chaos.trainers()[victim]->Wait(absl::Seconds(10)).IgnoreError();
      ++kills;
    }
    chaos.StartTrainer();  // Spot capacity comes back.
  }
  auto done = chaos.WaitDone(absl::Seconds(120));
  const std::string chaos_dir = dir.path() + "/chaos";
  ASSERT_TRUE(done.ok()) << done.status() << LogTails(chaos_dir);
  EXPECT_TRUE(sent_sigterm);
  EXPECT_TRUE(crashed_shard);
  EXPECT_GE(kills, 2);

  uint64_t committed = 0, duplicated = 0, reissued = 0;
  for (const auto& e : done->epochs()) {
    EXPECT_EQ(e.committed(), static_cast<uint64_t>(kUnits)) << "epoch " << e.epoch();
    committed += e.committed();
    duplicated += e.duplicated();
    reissued += e.reissued();
  }
  const uint64_t lost = kEpochs * kUnits - committed;
  EXPECT_EQ(lost, 0u);
  EXPECT_GT(reissued, 0u);
  auto val = chaos.ValLoss();
  ASSERT_TRUE(val.ok()) << val.status();
  EXPECT_LE(*val, *baseline * 1.10) << "chaos " << *val << " calm " << *baseline;
  EXPECT_EQ(chaos.Shutdown(), 0) << "every process should have ended by itself"
                                 << LogTails(chaos_dir);
  EXPECT_EQ(ProcessesMentioning(dir.path()), 0) << "a process was left behind";
  chaos_line = absl::StrFormat(
      "chaos: units_lost=%d units_duplicated=%d reissued=%d val_loss=%.4f baseline_val_loss=%.4f",
      lost, duplicated, reissued, *val, *baseline);
}

}  // namespace
}  // namespace spotps

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  if (!spotps::chaos_line.empty()) std::printf("%s\n", spotps::chaos_line.c_str());
  return result;
}
