#include "client/presence_stream.h"

#include <algorithm>

#include "common/rpc_retry.h"

namespace spotps {

PresenceKeeper::PresenceKeeper(Open open) : open_(std::move(open)) {
  thread_ = std::thread([this] { Keep(); });
}

void PresenceKeeper::Reopen() {
  absl::MutexLock lock(&mu_);
  reopen_ = true;
  if (stream_ != nullptr) stream_->Cancel();
}

void PresenceKeeper::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    if (stream_ != nullptr) stream_->Cancel();
  }
  if (thread_.joinable()) thread_.join();
}

void PresenceKeeper::Keep() {
  constexpr absl::Duration kFirstBackoff = absl::Milliseconds(100);
  absl::Duration backoff = kFirstBackoff;
  auto stopped = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopped_; };
  while (true) {
    PresenceStream* stream;
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      reopen_ = false;
      stream_ = open_();
      stream = stream_.get();
    }
    const absl::Time opened = absl::Now();
    const absl::Status s = stream->Wait();
    if (absl::IsUnimplemented(s)) return;
    // A stream that stayed open a while was healthy: a failure after it
    // is retried soon again.
    if (absl::Now() - opened > absl::Seconds(10)) backoff = kFirstBackoff;
    absl::MutexLock lock(&mu_);
    stream_.reset();
    if (s.ok() || reopen_ || stopped_) continue;  // Ended by the server or by us.
    mu_.AwaitWithTimeout(absl::Condition(&stopped), JitteredBackoff(backoff));
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

}  // namespace spotps
