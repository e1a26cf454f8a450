#include "trainer/elastic/graceful_drain.h"

#include <boost/asio/post.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace spotps {

GracefulDrain::GracefulDrain(absl::Duration deadline, std::function<void()> on_deadline)
    : deadline_(deadline),
      on_deadline_(std::move(on_deadline)),
      work_(boost::asio::make_work_guard(io_)),
      signals_(io_, SIGINT, SIGTERM),
      deadline_timer_(io_) {
  signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (!ec) Begin(absl::StrCat("signal ", signo));
  });
  io_thread_ = std::thread([this] { io_.run(); });
}

GracefulDrain::~GracefulDrain() {
  Finished();
  io_.stop();
  io_thread_.join();
  IgnoreFurtherSignals();
}

void GracefulDrain::IgnoreFurtherSignals() {
  // Removing the signals from the set restores their default actions, and a
  // second SIGTERM (Slurm's scancel signals the trainer and its batch shell,
  // which passes the signal on) would then kill a trainer that drained and
  // is on its way out with status 143: ignore them instead.
  boost::system::error_code ignored;
  signals_.clear(ignored);
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGINT, SIG_IGN);
}

void GracefulDrain::Begin(const std::string& reason) {
  if (stop_.exchange(true)) return;
  begin_time_ = absl::Now();
  LogWarningF("drain: %s; finishing the current step (deadline %s)", reason,
              absl::FormatDuration(deadline_));
  // The timer lives on the io thread, whichever thread began the drain.
  boost::asio::post(io_, [this] { ArmDeadline(); });
}

void GracefulDrain::ArmDeadline() {
  deadline_timer_.expires_after(absl::ToChronoNanoseconds(deadline_));
  deadline_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || finished_.HasBeenNotified()) return;
    LogWarning("drain: deadline passed, dropping the step in flight");
    on_deadline_();
    std::fflush(nullptr);
    std::_Exit(0);
  });
}

void GracefulDrain::Finished() {
  if (finished_.HasBeenNotified()) return;
  if (stop_.load()) {
    drain_time_ = absl::Now() - begin_time_;
    // Drained: the process only leaves from here on.
    boost::asio::post(io_, [this] { IgnoreFurtherSignals(); });
  }
  finished_.Notify();
}

}  // namespace spotps
