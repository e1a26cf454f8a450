#include "trainer/runtime/thread_priority.h"

#include <ATen/Parallel.h>
#include <omp.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/process_priority.h"

namespace spotps {
namespace {

int ThisThreadId() { return static_cast<int>(syscall(SYS_gettid)); }

// On Linux PRIO_PROCESS with a thread id sets that one thread's nice value.
absl::Status SetNice(int tid, int nice) {
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice) == 0) return absl::OkStatus();
  if (errno == ESRCH) return absl::OkStatus();  // The thread has ended.
  return absl::InternalError(
      absl::StrCat("setpriority(thread ", tid, ", ", nice, "): ", std::strerror(errno)));
}

}  // namespace

ComputeFirstPriority::ComputeFirstPriority(int nice) : nice_(nice) {
  if (nice_ <= 0) return;
  absl::MutexLock lock(&mu_);
  compute_.insert(ThisThreadId());
  errno = 0;
  const int base = getpriority(PRIO_PROCESS, static_cast<id_t>(ThisThreadId()));
  target_ = std::min(19, (errno == 0 ? base : 0) + nice_);
  // LibTorch's intra-op team: OpenMP keeps the same threads for teams of
  // the same size, so these are the threads every forward/backward uses.
  const int team = at::get_num_threads();
  std::set<int>* compute = &compute_;
#pragma omp parallel num_threads(team)
  {
    const int tid = ThisThreadId();
#pragma omp critical
    compute->insert(tid);
  }
}

int ComputeFirstPriority::compute_threads() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(compute_.size());
}

absl::Status ComputeFirstPriority::LowerThisThread() {
  if (nice_ <= 0) return absl::OkStatus();
  const int tid = ThisThreadId();
  {
    absl::MutexLock lock(&mu_);
    if (compute_.count(tid) > 0 || !lowered_.insert(tid).second) return absl::OkStatus();
  }
  return SetNice(tid, target_);
}

absl::Status ComputeFirstPriority::LowerOtherThreads() {
  if (nice_ <= 0) return absl::OkStatus();
  const std::vector<int> threads = ThreadIdsOfThisProcess();
  if (threads.empty()) return absl::InternalError("cannot list /proc/self/task");
  absl::Status result;
  absl::MutexLock lock(&mu_);
  for (int tid : threads) {
    if (compute_.count(tid) > 0 || !lowered_.insert(tid).second) continue;
    if (absl::Status s = SetNice(tid, target_); !s.ok() && result.ok()) result = s;
  }
  return result;
}

}  // namespace spotps
