// GracefulDrain: turns SIGTERM, SIGINT or a spot-interruption notice into a
// bounded, clean stop of a trainer.
#ifndef SPOTPS_TRAINER_ELASTIC_GRACEFUL_DRAIN_H_
#define SPOTPS_TRAINER_ELASTIC_GRACEFUL_DRAIN_H_

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace spotps {

// Owns the stop flag the training loop polls and one thread that serves
// both the signal handler and the deadline timer. Promises: the first Begin() (or signal) raises the flag once; if
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
  // On the io thread: arms the deadline timer.
  void ArmDeadline();
  // On the io thread, or once it is gone: SIGTERM and SIGINT are ignored.
  void IgnoreFurtherSignals();

  const absl::Duration deadline_;
  const std::function<void()> on_deadline_;
  std::atomic<bool> stop_{false};
  absl::Notification finished_;
  absl::Time begin_time_;
  absl::Duration drain_time_ = absl::ZeroDuration();
  boost::asio::io_context io_;
  // Keeps io_.run() going after the signal handler has run.
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer deadline_timer_;
  std::thread io_thread_;
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_ELASTIC_GRACEFUL_DRAIN_H_
