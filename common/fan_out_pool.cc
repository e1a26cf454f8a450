#include "common/fan_out_pool.h"

#include <memory>
#include <utility>

namespace spotps {

FanOutPool::FanOutPool(std::function<void()> on_thread_start)
    : on_thread_start_(std::move(on_thread_start)) {}

FanOutPool::~FanOutPool() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

size_t FanOutPool::num_threads() const {
  absl::MutexLock lock(&mu_);
  return threads_.size();
}

std::vector<absl::Status> FanOutPool::RunAll(size_t n,
                                             const std::function<absl::Status(size_t)>& fn) {
  // Shared with the calls, so none touches freed memory however late it
  // drops its reference after the last decrement.
  struct Batch {
    absl::Mutex mu;
    size_t remaining;
    std::vector<absl::Status> results;
  };
  auto batch = std::make_shared<Batch>();
  batch->remaining = n;
  batch->results.resize(n);
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < n; ++i) {
      queue_.push_back([batch, &fn, i] {
        absl::Status result = fn(i);
        absl::MutexLock done(&batch->mu);
        batch->results[i] = std::move(result);
        --batch->remaining;
      });
    }
    // Every queued call gets a thread now: an idle one or a new one.
    while (idle_ < queue_.size()) {
      ++idle_;
      threads_.emplace_back([this] { WorkerLoop(); });
    }
  }
  absl::MutexLock done(&batch->mu);
  batch->mu.Await(absl::Condition(
      +[](size_t* left) { return *left == 0; }, &batch->remaining));
  return std::move(batch->results);
}

absl::Status FanOutPool::Run(size_t n, const std::function<absl::Status(size_t)>& fn) {
  return FirstError(RunAll(n, fn));
}

void FanOutPool::WorkerLoop() {
  if (on_thread_start_) on_thread_start_();
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](FanOutPool* p)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) { return p->stopping_ || !p->queue_.empty(); },
        this));
    if (queue_.empty()) return;  // Stopping, nothing left.
    std::function<void()> call = std::move(queue_.front());
    queue_.pop_front();
    --idle_;
    mu_.Unlock();
    call();
    mu_.Lock();
    ++idle_;
  }
}

absl::Status FirstError(const std::vector<absl::Status>& results) {
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace spotps
