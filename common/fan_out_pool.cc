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
  auto batch = std::make_shared<Batch>();
  batch->remaining = n;
  batch->results.resize(n);
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < n; ++i) queue_.push_back(Task{batch, &fn, i});
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
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](FanOutPool* p)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) { return p->stopping_ || !p->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // Stopping, nothing left.
      task = std::move(queue_.front());
      queue_.pop_front();
      --idle_;
    }
    absl::Status result = (*task.fn)(task.index);
    // Idle again before the caller learns the call ended, so that its next
    // Run finds this thread instead of starting another.
    {
      absl::MutexLock lock(&mu_);
      ++idle_;
    }
    absl::MutexLock done(&task.batch->mu);
    task.batch->results[task.index] = std::move(result);
    --task.batch->remaining;
  }
}

absl::Status FirstError(const std::vector<absl::Status>& results) {
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace spotps
