#include "tests/support/training_job.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "tests/support/log_fields.h"

namespace spotps::testing {

TrainingJob::TrainingJob(std::string dir, std::string tokens, JobOptions options)
    : dir_(std::move(dir)), tokens_(std::move(tokens)), options_(std::move(options)) {
  ::mkdir(dir_.c_str(), 0755);
}

absl::Status TrainingJob::StartShards(bool durable) {
  if (shards_ == nullptr) {
    if (absl::Status s = ReserveShards(durable); !s.ok()) return s;
  }
  if (absl::Status s = shards_->StartAll(); !s.ok()) return s;
  auto coordinator = CoordinatorClient::Connect(absl::StrCat("127.0.0.1:", shards_->port(0)));
  if (!coordinator.ok()) return coordinator.status();
  coordinator_ = *std::move(coordinator);
  return absl::OkStatus();
}

absl::Status TrainingJob::ReserveShards(bool durable) {
  auto shards = LocalShardCluster::Reserve(
      2,
      [&](int i, const std::string& addresses) {
        std::vector<std::string> f = {"--consistency=" + options_.consistency};
        if (!options_.default_optimizer) {
          f.insert(f.end(), {"--optimizer=adamw", "--lr=2e-3", "--warmup_steps=10"});
        }
        if (durable) f.push_back(absl::StrCat("--checkpoint_dir=", dir_, "/ckpt", i));
        if (i == 0) {  // Shard 0 coordinates and drives checkpoint and sync rounds.
          f.insert(f.end(), {absl::StrCat("--epochs=", options_.epochs),
                             absl::StrCat("--units_per_epoch=", options_.units_per_epoch),
                             "--worker_lease_s=2", "--unit_lease_s=6",
                             "--peers=" + addresses.substr(addresses.find(',') + 1)});
          if (durable) f.push_back("--checkpoint_every_s=2");
        }
        f.insert(f.end(), options_.shard_flags.begin(), options_.shard_flags.end());
        return f;
      },
      dir_);
  if (!shards.ok()) return shards.status();
  shards_ = *std::move(shards);
  return absl::OkStatus();
}

absl::Status TrainingJob::StartTrainer(const std::vector<std::string>& extra_flags) {
  const int index = static_cast<int>(trainers_.size());
  std::vector<std::string> argv = {BinaryPath("spotps-trainer"),
                                   "--ps=" + shards_->addresses(),
                                   "--model=" + options_.model,
                                   "--data=" + tokens_,
                                   absl::StrCat("--batch=", options_.batch),
                                   absl::StrCat("--seq_len=", options_.seq_len),
                                   "--threads=1",
                                   absl::StrCat("--worker_index=", index),
                                   "--log_every=20",
                                   "--eval_batches=0"};
  argv.insert(argv.end(), options_.trainer_flags.begin(), options_.trainer_flags.end());
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  auto t = ChildProcess::Start(argv, absl::StrCat(dir_, "/trainer", index, ".log"));
  if (!t.ok()) return t.status();
  trainers_.push_back(*std::move(t));
  return absl::OkStatus();
}

std::vector<int> TrainingJob::Running() {
  std::vector<int> alive;
  for (size_t i = 0; i < trainers_.size(); ++i) {
    if (trainers_[i]->running()) alive.push_back(static_cast<int>(i));
  }
  return alive;
}

absl::StatusOr<v1::ProgressResponse> TrainingJob::WaitDone(absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (absl::Now() < give_up) {
    auto p = coordinator_->Progress();
    if (p.ok() && p->done()) return p;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::DeadlineExceededError("the job did not finish in time");
}

absl::StatusOr<double> TrainingJob::ValLoss() {
  static int run = 0;  // A log per call: the child appends to it.
  const std::string log = absl::StrCat(dir_, "/generate", run++, ".log");
  auto gen = ChildProcess::Start(
      {BinaryPath("spotps-generate"), "--ps=" + shards_->addresses(), "--model=" + options_.model,
       "--data=" + tokens_, absl::StrCat("--batch=", options_.batch),
       absl::StrCat("--seq_len=", options_.seq_len), "--eval_batches=24", "--tokens=1",
       "--threads=1"},
      log);
  if (!gen.ok()) return gen.status();
  auto code = (*gen)->Wait(absl::Seconds(120));
  if (!code.ok() || *code != 0) return absl::InternalError(*ReadFile(log));
  return LogField(*ReadFile(log), "val_loss");
}

int TrainingJob::Shutdown() {
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

}  // namespace spotps::testing
