#include "ps/rpc/update_signal.h"

namespace spotps {

void UpdateSignal::Notify() {
  absl::MutexLock lock(&mu_);
  count_ += 1;
}

void UpdateSignal::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
}

bool UpdateSignal::shut_down() const {
  absl::MutexLock lock(&mu_);
  return shut_down_;
}

bool UpdateSignal::Admit() {
  absl::MutexLock lock(&mu_);
  if (shut_down_ || watchers_ >= max_watchers_) return false;
  watchers_ += 1;
  return true;
}

void UpdateSignal::Release() {
  absl::MutexLock lock(&mu_);
  watchers_ -= 1;
}

uint64_t UpdateSignal::count() const {
  absl::MutexLock lock(&mu_);
  return count_;
}

uint64_t UpdateSignal::WaitForChange(uint64_t seen, absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  // absl::Mutex re-evaluates the condition whenever the lock is released,
  // so Notify and Shutdown need no explicit condition variable signal.
  auto changed = [this, seen]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return count_ != seen || shut_down_; };
  mu_.AwaitWithDeadline(absl::Condition(&changed), deadline);
  return count_;
}

}  // namespace spotps
