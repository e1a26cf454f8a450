#include "common/background_loop.h"

#include <utility>

namespace spotps {

BackgroundLoop::BackgroundLoop(absl::Duration period, std::function<void()> tick)
    : period_(period), tick_(std::move(tick)) {}

BackgroundLoop::~BackgroundLoop() { Stop(); }

void BackgroundLoop::Start() {
  thread_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(period_)) tick_();
  });
}

void BackgroundLoop::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

}  // namespace spotps
