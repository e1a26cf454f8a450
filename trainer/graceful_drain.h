// GracefulDrain: turns SIGTERM, SIGINT or a spot-interruption notice into a
// bounded, clean stop of a trainer.
#ifndef SPOTPS_TRAINER_GRACEFUL_DRAIN_H_
#define SPOTPS_TRAINER_GRACEFUL_DRAIN_H_

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace spotps {

// Owns the stop flag the training loop polls, a signal handler thread and a
// watchdog. Promises: the first Begin() (or signal) raises the flag once; if
// Finished() is not called within `deadline` after that, `on_deadline` runs
// (deregister, so the coordinator re-issues the dropped unit) and the process
// exits 0, dropping the step in flight.
class GracefulDrain {
 public:
  GracefulDrain(absl::Duration deadline, std::function<void()> on_deadline);
  ~GracefulDrain();

  const std::atomic<bool>& stop_flag() const { return stop_; }
  void Begin(const std::string& reason);
  // The loop returned: the watchdog stands down.
  void Finished();
  bool draining() const { return stop_.load(); }
  // Time from Begin() to Finished() (zero if no drain happened).
  absl::Duration drain_time() const { return drain_time_; }

 private:
  void Watch();

  const absl::Duration deadline_;
  const std::function<void()> on_deadline_;
  std::atomic<bool> stop_{false};
  absl::Notification begun_, finished_;
  absl::Time begin_time_;
  absl::Duration drain_time_ = absl::ZeroDuration();
  boost::asio::io_context io_;
  boost::asio::signal_set signals_;
  std::thread signal_thread_;
  std::thread watchdog_;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_GRACEFUL_DRAIN_H_
