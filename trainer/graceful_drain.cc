#include "trainer/graceful_drain.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace spotps {

GracefulDrain::GracefulDrain(absl::Duration deadline, std::function<void()> on_deadline)
    : deadline_(deadline), on_deadline_(std::move(on_deadline)), signals_(io_, SIGINT, SIGTERM) {
  signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (!ec) Begin(absl::StrCat("signal ", signo));
  });
  signal_thread_ = std::thread([this] { io_.run(); });
  watchdog_ = std::thread([this] { Watch(); });
}

GracefulDrain::~GracefulDrain() {
  Finished();
  if (!begun_.HasBeenNotified()) begun_.Notify();
  io_.stop();
  signal_thread_.join();
  watchdog_.join();
}

void GracefulDrain::Begin(const std::string& reason) {
  if (stop_.exchange(true)) return;
  begin_time_ = absl::Now();
  std::fprintf(stderr, "drain: %s; finishing the current step (deadline %s)\n", reason.c_str(),
               absl::FormatDuration(deadline_).c_str());
  begun_.Notify();
}

void GracefulDrain::Finished() {
  if (finished_.HasBeenNotified()) return;
  if (stop_.load()) drain_time_ = absl::Now() - begin_time_;
  finished_.Notify();
}

void GracefulDrain::Watch() {
  begun_.WaitForNotification();
  if (finished_.HasBeenNotified() || !stop_.load()) return;
  if (finished_.WaitForNotificationWithTimeout(deadline_)) return;
  std::fprintf(stderr, "drain: deadline passed, dropping the step in flight\n");
  on_deadline_();
  std::fflush(nullptr);
  std::_Exit(0);
}

}  // namespace spotps
