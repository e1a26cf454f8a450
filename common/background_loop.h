// BackgroundLoop: the one way spotps runs periodic work on a thread of its
// own (heartbeats, checkpoint rounds, sync rounds).
#ifndef SPOTPS_COMMON_BACKGROUND_LOOP_H_
#define SPOTPS_COMMON_BACKGROUND_LOOP_H_

#include <functional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace spotps {

// Owns one thread that calls `tick` every `period` (back to back when the
// period is zero: the tick then paces itself, e.g. by a bounded wait) until
// Stop(). Promises: ticks never overlap; Stop() wakes a waiting loop at once
// and returns only after the last tick finished; Stop() is idempotent and the
// destructor calls it.
class BackgroundLoop {
 public:
  BackgroundLoop(absl::Duration period, std::function<void()> tick);
  BackgroundLoop(const BackgroundLoop&) = delete;
  BackgroundLoop& operator=(const BackgroundLoop&) = delete;
  ~BackgroundLoop();

  // Starts the thread; the first tick comes one period later. Call once.
  void Start();
  void Stop();
  // True once Stop() began: a long tick may check it to return early.
  bool stopping() const { return stop_.HasBeenNotified(); }

 private:
  const absl::Duration period_;
  const std::function<void()> tick_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace spotps

#endif  // SPOTPS_COMMON_BACKGROUND_LOOP_H_
