// Compute first on a shared host: a trainer's non-compute threads and a
// co-located shard (spotps-ps --nice) run at a lower priority than the
// trainer's compute threads, which are never touched; a whole trainer
// yields to other work with spotps-trainer --nice.
#include "trainer/runtime/thread_priority.h"

#include <ATen/Parallel.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"
#include "tests/support/generated_corpus.h"

namespace spotps {
namespace {

int ThisThreadId() { return static_cast<int>(syscall(SYS_gettid)); }
int NiceOf(int tid) { return getpriority(PRIO_PROCESS, static_cast<id_t>(tid)); }

// A thread that reports its id and waits until released.
class ParkedThread {
 public:
  ParkedThread()
      : thread_([this] {
          tid_ = ThisThreadId();
          started_.Notify();
          release_.WaitForNotification();
        }) {
    started_.WaitForNotification();
  }
  ~ParkedThread() {
    release_.Notify();
    thread_.join();
  }
  int tid() const { return tid_; }

 private:
  absl::Notification started_, release_;
  std::atomic<int> tid_{0};
  std::thread thread_;
};

TEST(ComputeFirstPriorityTest, LowersOtherThreadsButNotTheComputeThreads) {
  at::set_num_threads(2);
  const int main_nice = NiceOf(ThisThreadId());
  ComputeFirstPriority priority(5);          // Relative to the compute threads.
  EXPECT_GE(priority.compute_threads(), 2);  // This thread and an OpenMP worker.
  ParkedThread before;                       // Started after the team was recorded.
  ASSERT_TRUE(priority.LowerOtherThreads().ok());
  EXPECT_EQ(NiceOf(before.tid()), main_nice + 5);
  EXPECT_EQ(NiceOf(ThisThreadId()), main_nice) << "the compute thread keeps its priority";
  // Threads started later are lowered by the next sweep, and a transfer
  // task can lower itself.
  ParkedThread later;
  ASSERT_TRUE(priority.LowerOtherThreads().ok());
  EXPECT_EQ(NiceOf(later.tid()), main_nice + 5);
  std::thread([&] {
    EXPECT_TRUE(priority.LowerThisThread().ok());
    EXPECT_EQ(NiceOf(ThisThreadId()), main_nice + 5);
  }).join();
  EXPECT_EQ(NiceOf(ThisThreadId()), main_nice);
}

TEST(ComputeFirstPriorityTest, ZeroLeavesEveryThreadAlone) {
  const int main_nice = NiceOf(ThisThreadId());
  ComputeFirstPriority priority(0);
  ParkedThread other;
  ASSERT_TRUE(priority.LowerOtherThreads().ok());
  EXPECT_EQ(NiceOf(other.tid()), main_nice);
}

// Field 19 of /proc/<pid>/task/<tid>/stat is the thread's nice value.
std::vector<int> ThreadNiceValues(int pid) {
  std::vector<int> values;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(task.c_str());
  if (dir == nullptr) return values;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream in(task + "/" + entry->d_name + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i) {
    }
    values.push_back(std::stoi(field));
  }
  closedir(dir);
  return values;
}

TEST(ShardNiceTest, EveryThreadOfTheShardRunsAtItsNiceValue) {
  testing::TempDir dir;
  auto shards = testing::LocalShardCluster::Start(1, {"--nice=7"}, dir.path());
  ASSERT_TRUE(shards.ok()) << shards.status();
  const std::vector<int> values = ThreadNiceValues((*shards)->shard(0).pid());
  ASSERT_GT(values.size(), 1u) << "gRPC's threads are running";
  const int base = NiceOf(ThisThreadId());
  for (int v : values) EXPECT_EQ(v, std::min(19, base + 7));
}

// spotps-trainer --nice: a trainer sharing a host yields to other work;
// every thread it starts, compute and gRPC alike, runs at least that low.
TEST(TrainerNiceTest, EveryThreadOfTheTrainerRunsAtOrBelowItsNiceValue) {
  testing::TempDir dir;
  auto tokens = testing::MakeTokenFile(dir.path(), 3000);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  auto port = testing::PickFreePorts(1);
  ASSERT_TRUE(port.ok());
  // Nothing listens there: the trainer waits for its cluster, threads up.
  const std::string log = dir.path() + "/trainer.log";
  auto trainer = testing::ChildProcess::Start(
      {testing::BinaryPath("spotps-trainer"), absl::StrCat("--ps=127.0.0.1:", (*port)[0]),
       "--model=tiny", "--data=" + *tokens, "--threads=1", "--nice=5", "--ps_timeout_s=60"},
      log);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->WaitForLog(log, "waiting for the coordinator", absl::Seconds(60)).ok())
      << ReadFile(log).value_or("");
  const int base = NiceOf(ThisThreadId());
  EXPECT_EQ(NiceOf((*trainer)->pid()), std::min(19, base + 5));
  const std::vector<int> values = ThreadNiceValues((*trainer)->pid());
  ASSERT_GT(values.size(), 1u);
  for (int v : values) EXPECT_GE(v, std::min(19, base + 5));
}

}  // namespace
}  // namespace spotps
