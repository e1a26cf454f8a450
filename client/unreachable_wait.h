// UnreachableWait: how every spotps program rides out a cluster that is not
// there yet (shards still starting, a shard restarting, the coordinator
// moving): it retries for a bounded time and says, every few seconds, what it
// waits for, so that nobody stares at a silent terminal.
//
//   UnreachableWait wait("the coordinator at 10.0.0.1:7000", absl::Seconds(120));
//   absl::StatusOr<v1::ProgressResponse> p =
//       wait.Retry<v1::ProgressResponse>([&] { return coordinator->Progress(); });
//
// A call is retried while it fails with UNAVAILABLE or DEADLINE_EXCEEDED
// (and FAILED_PRECONDITION too under WaitForModel(): the shards answer but
// hold no model yet). When the time is up the last error comes back with its
// code, its message prefixed with what was waited for, for how long, and a
// hint when nothing listens at the addresses.
#ifndef SPOTPS_CLIENT_UNREACHABLE_WAIT_H_
#define SPOTPS_CLIENT_UNREACHABLE_WAIT_H_

#include <atomic>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace spotps {

// True for the codes a restarting or not-yet-started cluster produces.
bool IsUnreachable(const absl::Status& status);

// Owns the deadline of one wait and its progress lines. Not thread-safe;
// use one per waiting thread.
class UnreachableWait {
 public:
  // `what` names the peer and its addresses ("the shards at a:1,b:2"); a
  // zero or negative `timeout` makes a single attempt.
  UnreachableWait(std::string what, absl::Duration timeout);

  // Also waits while the shards say the model is not initialised yet.
  UnreachableWait& WaitForModel();
  // Where progress lines go (default: LogInfo), and how often (default 5 s;
  // the first after 2 s, so that a quick recovery stays quiet).
  UnreachableWait& ReportTo(std::function<void(const std::string&)> report);
  UnreachableWait& ReportEvery(absl::Duration interval);
  // Stops waiting (returning the last error) once `*stop` is true, e.g. a
  // trainer told to drain.
  UnreachableWait& Until(const std::atomic<bool>* stop);

  // Calls `attempt` until it succeeds, fails otherwise, or the time is up.
  absl::Status Retry(const std::function<absl::Status()>& attempt);
  template <typename T>
  absl::StatusOr<T> Retry(const std::function<absl::StatusOr<T>()>& attempt) {
    absl::StatusOr<T> result = absl::UnknownError("never attempted");
    absl::Status s = Retry([&]() -> absl::Status {
      result = attempt();
      return result.status();
    });
    if (!s.ok()) return s;
    return result;
  }

  // The final error for `last` after waiting since construction; exposed
  // for callers that run their own loop.
  absl::Status GiveUp(const absl::Status& last) const;

 private:
  bool ShouldWait(const absl::Status& s) const;

  const std::string what_;
  const absl::Duration timeout_;
  const absl::Time start_;
  bool wait_for_model_ = false;
  std::function<void(const std::string&)> report_;
  absl::Duration report_every_ = absl::Seconds(5);
  const std::atomic<bool>* stop_ = nullptr;
};

}  // namespace spotps

#endif  // SPOTPS_CLIENT_UNREACHABLE_WAIT_H_
