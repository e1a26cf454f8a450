// spotps-bench-churn: what a spot market's preemptions cost in throughput.
//
// One job of --units work units (one trainer step each) on 2 local shards,
// trained three ways in one invocation:
//   churn   --trainers trainers; from the first commit on, every
//           --preempt_every_s one running trainer (seeded choice) is
//           preempted: a --notice_share of them with notice (alternately
//           SIGTERM and an EC2 instance-action from its own fake metadata
//           service, kill -9 after --notice_window_s if still running), the
//           rest by kill -9 at once; a replacement starts --replace_after_s
//           after each preemption. Until the job is done.
//   calm    ceil(mean live trainers of the churn run) trainers, no
//           preemptions, the whole job: the throughput and the validation
//           loss to compare with. Its trainers poll fake metadata services
//           of their own as the churn run's do; no notice ever comes.
//   floor   floor(mean live) trainers, no preemptions, until half the job:
//           its throughput, so that the calm figure can be interpolated to
//           the churn run's fractional mean (skipped when it is whole).
// Throughput: committed tokens per second from the first commit to the end.
// Figures: retained = churn tokens/s / calm tokens/s at the same mean live
// trainers; lost = units never committed; twice = pushes shard 0 applied
// beyond the committed units (batches whose gradient landed twice);
// loss_ratio = churn val loss / calm val loss (same units trained); join
// (a replacement's start to its first push) and notice-to-exit times; idle
// and steal = the host's idle CPU share and the share its hypervisor gave
// other guests, over the measured time (/proc/stat): a run that lost time
// waiting, or to a noisy neighbour, from one that spent it on work;
// waited_out = averaged updates that waited out --average_wait_ms short of
// their k pushes; duplicate_pushes = pushes the shards found duplicates,
// every shard (a unit trained again after its trainer died having pushed
// it); the trainers' and shards' CPU time.
// Last line: churn: retained=X lost=N twice=M loss_ratio=L
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cluster.h"
#include "common/atomic_file.h"
#include "common/command_line.h"
#include "common/consistency.h"
#include "common/exit_status.h"
#include "common/log.h"
#include "common/usage_problems.h"
#include "tests/support/child_process.h"
#include "tests/support/fake_metadata_server.h"
#include "tests/support/generated_corpus.h"
#include "tests/support/log_fields.h"
#include "tests/support/training_job.h"

ABSL_FLAG(std::string, model, "small", "Model preset or TorchScript file.");
ABSL_FLAG(int, trainers, 4, "Trainers of the churn run.");
ABSL_FLAG(int64_t, units, 600, "Job size in work units (one trainer step each).");
ABSL_FLAG(int64_t, batch, 8, "Sequences per step.");
ABSL_FLAG(int64_t, seq_len, 128, "Tokens per sequence.");
ABSL_FLAG(int, threads, 1, "Compute threads per trainer.");
ABSL_FLAG(std::string, consistency, "async",
          "The shards' --consistency (async is the default mode, fresh averaging).");
ABSL_FLAG(std::string, staleness_method, "",
          "The shards' --staleness_method; empty: the mode's own (with local:H, delayed runs "
          "asynchronous local steps).");
ABSL_FLAG(double, preempt_every_s, 30, "Seconds between preemptions.");
ABSL_FLAG(double, notice_share, 0.5, "Share of preemptions that come with a notice.");
ABSL_FLAG(double, notice_window_s, 10,
          "After a notice, kill -9 the trainer if it still runs this much later.");
ABSL_FLAG(double, replace_after_s, 5, "A replacement starts this long after a preemption.");
ABSL_FLAG(double, worker_lease_s, 10, "The coordinator's --worker_lease_s (its default).");
ABSL_FLAG(double, unit_lease_s, 60, "The coordinator's --unit_lease_s (its default).");
ABSL_FLAG(std::string, data, "", "Token file; empty: a generated corpus.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the choice of trainers to preempt.");
ABSL_FLAG(double, job_timeout_s, 3600, "Give up on a run after this long.");

namespace spotps {
namespace {

struct RunResult {
  double tokens_per_s = 0;
  double mean_live = 0;  // Time-weighted running trainers, first commit to end.
  double val_loss = 0;   // Of the final weights (whole-job runs only).
  double idle = 0;       // The host's idle CPU share, first commit to end.
  double steal = 0;      // Its share stolen by other guests, likewise.
  double trainer_cpu_s = 0, shard_cpu_s = 0;  // CPU time of the processes, whole run.
  int64_t committed = 0, lost = 0, twice = 0, duplicated = 0, reissued = 0;
  int64_t waited_out = 0;        // Averaged updates the wait cut short, every shard.
  int64_t duplicate_pushes = 0;  // Pushes found duplicates, every shard.
  int preemptions = 0, with_notice = 0;
  std::vector<double> join_s;    // Replacements: start to first push.
  std::vector<double> notice_s;  // Notice (SIGTERM or metadata) to exit.
};

// The host's CPU time so far (/proc/stat's first line, in ticks): all of
// it, what was idle (idle and iowait) and what other guests took (steal).
struct HostCpu {
  int64_t total = 0, idle = 0, steal = 0;

  static HostCpu Now() {
    HostCpu cpu;
    std::ifstream stat("/proc/stat");
    std::string name;
    stat >> name;
    int64_t ticks = 0;
    for (int field = 0; field < 8 && stat >> ticks; ++field) {
      cpu.total += ticks;
      if (field == 3 || field == 4) cpu.idle += ticks;
      if (field == 7) cpu.steal = ticks;
    }
    return cpu;
  }
  // The idle and stolen shares of the time since `earlier`.
  double IdleSince(const HostCpu& earlier) const {
    return ShareSince(earlier, idle - earlier.idle);
  }
  double StealSince(const HostCpu& earlier) const {
    return ShareSince(earlier, steal - earlier.steal);
  }
  double ShareSince(const HostCpu& earlier, int64_t ticks) const {
    return static_cast<double>(ticks) / std::max<int64_t>(1, total - earlier.total);
  }
};

// One trainer the churn run started, and what is pending for it.
struct Slot {
  int index = 0;  // TrainingJob's trainer index.
  std::unique_ptr<testing::FakeMetadataServer> metadata;
  bool replacement = false;
  absl::Time noticed = absl::InfiniteFuture();  // When its notice was given.
  bool exited = false;
};

class ChurnRun {
 public:
  ChurnRun(std::string dir, std::string tokens, int trainers, bool churn, int64_t stop_at_units)
      : dir_(std::move(dir)),
        tokens_(std::move(tokens)),
        trainers_(trainers),
        churn_(churn),
        stop_at_units_(stop_at_units),
        rng_(absl::GetFlag(FLAGS_seed)) {}

  absl::StatusOr<RunResult> Run();

 private:
  absl::Status StartTrainer(bool replacement);
  void Preempt(absl::Time now);
  void WatchExits(absl::Time now);
  absl::Status Finish(int64_t committed_at_start, absl::Time start, absl::Time end);
  void Shutdown();

  const std::string dir_, tokens_;
  const int trainers_;
  const bool churn_;
  const int64_t stop_at_units_;
  std::mt19937_64 rng_;
  std::unique_ptr<testing::TrainingJob> job_;
  std::vector<Slot> slots_;
  std::vector<absl::Time> replacements_due_;
  std::vector<std::pair<int, absl::Time>> kills_due_;  // Slot, when.
  RunResult result_;
};

testing::JobOptions OptionsFromFlags() {
  testing::JobOptions o;
  o.epochs = 1;
  o.units_per_epoch = static_cast<int>(absl::GetFlag(FLAGS_units));
  o.consistency = absl::GetFlag(FLAGS_consistency);
  // Local steps keep the outer optimizer their mode defaults to (Nesterov
  // SGD); the trainers run the inner AdamW.
  o.default_optimizer = absl::StartsWith(o.consistency, "local:");
  o.model = absl::GetFlag(FLAGS_model);
  o.batch = static_cast<int>(absl::GetFlag(FLAGS_batch));
  o.seq_len = static_cast<int>(absl::GetFlag(FLAGS_seq_len));
  o.trainer_flags = {absl::StrCat("--threads=", absl::GetFlag(FLAGS_threads))};
  o.shard_flags = {absl::StrCat("--worker_lease_s=", absl::GetFlag(FLAGS_worker_lease_s)),
                   absl::StrCat("--unit_lease_s=", absl::GetFlag(FLAGS_unit_lease_s))};
  if (!absl::GetFlag(FLAGS_staleness_method).empty()) {
    o.shard_flags.push_back("--staleness_method=" + absl::GetFlag(FLAGS_staleness_method));
  }
  return o;
}

absl::Status ChurnRun::StartTrainer(bool replacement) {
  Slot slot;
  slot.index = static_cast<int>(job_->trainers().size());
  slot.replacement = replacement;
  // Calm runs' trainers watch for notices too (that never come), so that
  // the runs differ in the preemptions alone, not in the polling's CPU.
  auto metadata = testing::FakeMetadataServer::Start();
  if (!metadata.ok()) return metadata.status();
  slot.metadata = *std::move(metadata);
  const std::vector<std::string> flags = {
      "--spot_notice=aws", "--metadata_url=" + slot.metadata->url(), "--spot_poll_s=1"};
  if (absl::Status s = job_->StartTrainer(flags); !s.ok()) return s;
  slots_.push_back(std::move(slot));
  return absl::OkStatus();
}

// Preempts one running trainer that has no notice pending.
void ChurnRun::Preempt(absl::Time now) {
  std::vector<int> candidates;
  for (int i = 0; i < static_cast<int>(slots_.size()); ++i) {
    if (!slots_[i].exited && slots_[i].noticed == absl::InfiniteFuture() &&
        job_->trainers()[slots_[i].index]->running()) {
      candidates.push_back(i);
    }
  }
  if (candidates.empty()) return;
  Slot& slot = slots_[candidates[rng_() % candidates.size()]];
  testing::ChildProcess& process = *job_->trainers()[slot.index];
  ++result_.preemptions;
  const double share = absl::GetFlag(FLAGS_notice_share);
  const bool notice = result_.with_notice < std::lround(result_.preemptions * share);
  if (notice) {
    ++result_.with_notice;
    slot.noticed = now;
    if (result_.with_notice % 2 == 1) {
      process.Signal(SIGTERM);
    } else {
      slot.metadata->ScheduleNotice("terminate", absl::FormatTime(now + absl::Seconds(120)));
    }
    kills_due_.push_back({static_cast<int>(&slot - slots_.data()),
                          now + absl::Seconds(absl::GetFlag(FLAGS_notice_window_s))});
  } else {
    process.Signal(SIGKILL);
  }
  std::printf("churn:   preempted trainer %d %s at %s\n", slot.index,
              notice ? "with notice" : "by kill -9", ClockTime(now).c_str());
  replacements_due_.push_back(now + absl::Seconds(absl::GetFlag(FLAGS_replace_after_s)));
}

void ChurnRun::WatchExits(absl::Time now) {
  for (Slot& slot : slots_) {
    if (slot.exited || job_->trainers()[slot.index]->running()) continue;
    slot.exited = true;
    if (slot.noticed != absl::InfiniteFuture()) {
      result_.notice_s.push_back(absl::ToDoubleSeconds(now - slot.noticed));
    }
  }
  for (auto it = kills_due_.begin(); it != kills_due_.end();) {
    if (now < it->second) {
      ++it;
      continue;
    }
    Slot& slot = slots_[it->first];
    if (job_->trainers()[slot.index]->running()) job_->trainers()[slot.index]->Signal(SIGKILL);
    it = kills_due_.erase(it);
  }
}

absl::StatusOr<RunResult> ChurnRun::Run() {
  ::mkdir(dir_.c_str(), 0755);
  job_ = std::make_unique<testing::TrainingJob>(dir_, tokens_, OptionsFromFlags());
  if (absl::Status s = job_->StartShards(/*durable=*/false); !s.ok()) return s;
  for (int t = 0; t < trainers_; ++t) {
    if (absl::Status s = StartTrainer(false); !s.ok()) return s;
  }
  const absl::Duration every = absl::Seconds(absl::GetFlag(FLAGS_preempt_every_s));
  const absl::Time give_up = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_job_timeout_s));
  absl::Time start = absl::InfiniteFuture(), last = absl::Now(), next_preempt, next_report;
  int64_t committed_at_start = 0;
  HostCpu cpu_at_start, cpu_at_report;
  double live_seconds = 0;
  for (;;) {
    absl::SleepFor(absl::Milliseconds(100));
    const absl::Time now = absl::Now();
    if (now > give_up) return absl::DeadlineExceededError("the run did not finish in time");
    auto progress = job_->Progress();
    if (!progress.ok()) continue;
    const int64_t committed = progress->epochs().empty() ? 0 : progress->epochs(0).committed();
    WatchExits(now);
    const int live = static_cast<int>(job_->Running().size());
    if (start == absl::InfiniteFuture()) {
      if (committed == 0) continue;
      start = last = now;
      committed_at_start = committed;
      cpu_at_start = cpu_at_report = HostCpu::Now();
      next_preempt = now + every;
      next_report = now + absl::Seconds(10);
    }
    live_seconds += live * absl::ToDoubleSeconds(now - last);
    last = now;
    if (progress->done() || (stop_at_units_ > 0 && committed >= stop_at_units_)) {
      result_.mean_live = live_seconds / std::max(1e-9, absl::ToDoubleSeconds(now - start));
      result_.committed = committed;
      const HostCpu cpu = HostCpu::Now();
      result_.idle = cpu.IdleSince(cpu_at_start);
      result_.steal = cpu.StealSince(cpu_at_start);
      if (absl::Status s = Finish(committed_at_start, start, now); !s.ok()) return s;
      return result_;
    }
    if (churn_ && now >= next_preempt) {
      Preempt(now);
      next_preempt += every;
    }
    while (!replacements_due_.empty() && now >= replacements_due_.front()) {
      replacements_due_.erase(replacements_due_.begin());
      if (absl::Status s = StartTrainer(true); !s.ok()) return s;
    }
    if (now >= next_report) {
      const HostCpu cpu = HostCpu::Now();
      std::printf(
          "churn:   %.0f s: %lld/%lld units committed, %d trainers running, idle %.3f steal %.3f\n",
          absl::ToDoubleSeconds(now - start), static_cast<long long>(committed),
          static_cast<long long>(absl::GetFlag(FLAGS_units)), live, cpu.IdleSince(cpu_at_report),
          cpu.StealSince(cpu_at_report));
      cpu_at_report = cpu;
      std::fflush(stdout);
      next_report += absl::Seconds(10);
    }
  }
}

// Reads the outcome, then stops every process.
absl::Status ChurnRun::Finish(int64_t committed_at_start, absl::Time start, absl::Time end) {
  const int64_t tokens_per_unit = absl::GetFlag(FLAGS_batch) * absl::GetFlag(FLAGS_seq_len);
  result_.tokens_per_s = static_cast<double>(result_.committed - committed_at_start) *
                         tokens_per_unit / std::max(1e-9, absl::ToDoubleSeconds(end - start));
  if (stop_at_units_ > 0) {
    for (auto& t : job_->trainers()) t->Signal(SIGKILL);
    Shutdown();
    return absl::OkStatus();
  }
  auto progress = job_->Progress();
  if (!progress.ok()) return progress.status();
  result_.lost = absl::GetFlag(FLAGS_units) - static_cast<int64_t>(progress->epochs(0).committed());
  result_.duplicated = static_cast<int64_t>(progress->epochs(0).duplicated());
  result_.reissued = static_cast<int64_t>(progress->epochs(0).reissued());
  auto cluster = Cluster::Connect(job_->shards().addresses());
  if (!cluster.ok()) return cluster.status();
  auto stats = (*cluster)->Stats();
  if (!stats.ok()) return stats.status();
  result_.twice =
      std::max<int64_t>(0, static_cast<int64_t>((*stats)[0].pushes_applied()) - result_.committed);
  for (const v1::StatsResponse& shard : *stats) {
    result_.waited_out += static_cast<int64_t>(shard.averaged_updates_waited_out());
    result_.duplicate_pushes += static_cast<int64_t>(shard.pushes_duplicate());
  }
  auto loss = job_->ValLoss();
  if (!loss.ok()) return loss.status();
  result_.val_loss = *loss;
  Shutdown();
  for (const Slot& slot : slots_) {
    absl::StatusOr<std::string> log = ReadFile(absl::StrCat(dir_, "/trainer", slot.index, ".log"));
    // What each trainer cost: a start's CPU beyond its steps' shows here.
    testing::ChildProcess& process = *job_->trainers()[slot.index];
    std::printf("churn:   trainer %d (%s, exit %d): cpu %.1f s, steps %.0f\n", slot.index,
                slot.replacement ? "replacement" : "first",
                process.Wait(absl::ZeroDuration()).value_or(-1),
                absl::ToDoubleSeconds(process.cpu_time()),
                log.ok() ? testing::LogField(*log, "steps") : -1.0);
    if (!slot.replacement) continue;
    if (!log.ok() || log->find("first_push_s=") == std::string::npos) continue;
    const double first_push = testing::LogField(*log, "first_push_s");
    if (first_push >= 0) result_.join_s.push_back(first_push);
  }
  return absl::OkStatus();
}

// Stops every process and sums the CPU time they used.
void ChurnRun::Shutdown() {
  job_->Shutdown();
  for (auto& t : job_->trainers()) {
    if (!t->running()) result_.trainer_cpu_s += absl::ToDoubleSeconds(t->cpu_time());
  }
  for (int i = 0; i < 2; ++i) {
    if (!job_->shards().shard(i).running()) {
      result_.shard_cpu_s += absl::ToDoubleSeconds(job_->shards().shard(i).cpu_time());
    }
  }
}

std::string Summary(const std::vector<double>& v) {
  if (v.empty()) return "-";
  std::vector<double> s = v;
  std::sort(s.begin(), s.end());
  return absl::StrFormat("median %.2f s max %.2f s (%d)", s[s.size() / 2], s.back(), s.size());
}

void Print(const char* name, int trainers, const RunResult& r) {
  std::printf(
      "churn: %-6s trainers=%d mean_live=%.2f tokens_per_s=%.0f committed=%lld lost=%lld "
      "twice=%lld duplicated=%lld reissued=%lld waited_out=%lld duplicate_pushes=%lld "
      "val_loss=%.4f idle=%.3f steal=%.3f "
      "trainer_cpu_s=%.1f shard_cpu_s=%.1f\n",
      name, trainers, r.mean_live, r.tokens_per_s, static_cast<long long>(r.committed),
      static_cast<long long>(r.lost), static_cast<long long>(r.twice),
      static_cast<long long>(r.duplicated), static_cast<long long>(r.reissued),
      static_cast<long long>(r.waited_out), static_cast<long long>(r.duplicate_pushes), r.val_loss,
      r.idle, r.steal, r.trainer_cpu_s, r.shard_cpu_s);
  std::fflush(stdout);
}

// Every problem with the flags, before anything starts.
UsageProblems FlagProblems() {
  UsageProblems problems;
  problems.Check(ParseConsistency(absl::GetFlag(FLAGS_consistency)).status(), "--consistency");
  for (const auto& [name, value] :
       {std::pair<const char*, int64_t>{"--trainers", absl::GetFlag(FLAGS_trainers)},
        {"--batch", absl::GetFlag(FLAGS_batch)},
        {"--seq_len", absl::GetFlag(FLAGS_seq_len)},
        {"--threads", absl::GetFlag(FLAGS_threads)}}) {
    problems.Require(value >= 1, absl::StrCat(name, " must be at least 1"));
  }
  problems.Require(absl::GetFlag(FLAGS_units) >= 2, "--units must be at least 2");
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"--preempt_every_s", absl::GetFlag(FLAGS_preempt_every_s)},
        {"--worker_lease_s", absl::GetFlag(FLAGS_worker_lease_s)},
        {"--unit_lease_s", absl::GetFlag(FLAGS_unit_lease_s)},
        {"--job_timeout_s", absl::GetFlag(FLAGS_job_timeout_s)}}) {
    problems.Require(value > 0, absl::StrCat(name, " must be positive"));
  }
  const double share = absl::GetFlag(FLAGS_notice_share);
  problems.Require(share >= 0 && share <= 1, "--notice_share must be in [0, 1]");
  problems.Require(
      absl::GetFlag(FLAGS_notice_window_s) >= 0 && absl::GetFlag(FLAGS_replace_after_s) >= 0,
      "--notice_window_s and --replace_after_s must not be negative");
  if (const std::string data = absl::GetFlag(FLAGS_data); !data.empty()) {
    struct stat st;
    problems.Require(::stat(data.c_str(), &st) == 0 && S_ISREG(st.st_mode),
                     absl::StrCat("--data: no file ", data));
  }
  return problems;
}

int Main() {
  testing::TempDir work;
  std::string tokens = absl::GetFlag(FLAGS_data);
  if (tokens.empty()) {
    auto made = testing::MakeTokenFile(work.path(), 100'000);
    if (!made.ok()) {
      std::fprintf(stderr, "spotps-bench-churn: %s\n", made.status().ToString().c_str());
      return 1;
    }
    tokens = *made;
  }
  const int trainers = absl::GetFlag(FLAGS_trainers);
  const int64_t units = absl::GetFlag(FLAGS_units);
  auto fail = [&](const char* run, const absl::Status& s) {
    std::fprintf(stderr, "spotps-bench-churn: %s run: %s%s\n", run, s.ToString().c_str(),
                 testing::LogTails(work.path() + "/" + run).c_str());
    return 1;
  };
  std::printf("churn: logs in %s (kept with SPOTPS_KEEP_TEST_DIRS=1)\n", work.path().c_str());
  std::printf("churn: churn run: %d trainers, %lld units, a preemption every %.0f s\n", trainers,
              static_cast<long long>(units), absl::GetFlag(FLAGS_preempt_every_s));
  auto churn = ChurnRun(work.path() + "/churn", tokens, trainers, true, 0).Run();
  if (!churn.ok()) return fail("churn", churn.status());
  Print("churn", trainers, *churn);
  const int high = std::clamp(static_cast<int>(std::ceil(churn->mean_live - 1e-6)), 1, trainers);
  const int low = std::max(1, static_cast<int>(std::floor(churn->mean_live + 1e-6)));
  auto calm = ChurnRun(work.path() + "/calm", tokens, high, false, 0).Run();
  if (!calm.ok()) return fail("calm", calm.status());
  Print("calm", high, *calm);
  double expected = calm->tokens_per_s;
  if (low < high) {
    auto floor = ChurnRun(work.path() + "/floor", tokens, low, false, units / 2).Run();
    if (!floor.ok()) return fail("floor", floor.status());
    Print("floor", low, *floor);
    expected =
        floor->tokens_per_s + (churn->mean_live - low) * (calm->tokens_per_s - floor->tokens_per_s);
  }
  const double retained = churn->tokens_per_s / std::max(1e-9, expected);
  const double loss_ratio = churn->val_loss / std::max(1e-9, calm->val_loss);
  std::printf("churn: preemptions=%d with_notice=%d join: %s notice_to_exit: %s\n",
              churn->preemptions, churn->with_notice, Summary(churn->join_s).c_str(),
              Summary(churn->notice_s).c_str());
  std::printf("churn: retained=%.3f lost=%lld twice=%lld loss_ratio=%.3f\n", retained,
              static_cast<long long>(churn->lost), static_cast<long long>(churn->twice),
              loss_ratio);
  return 0;
}

}  // namespace
}  // namespace spotps

int main(int argc, char** argv) {
  spotps::SetLogProgramName("spotps-bench-churn");
  spotps::ParseFlagsOrExit(argc, argv);
  if (spotps::UsageProblems problems = spotps::FlagProblems(); !problems.empty()) {
    return spotps::UsageError(problems.ToStatus());
  }
  if (spotps::CheckFlagsOnly()) return 0;
  return spotps::Main();
}
