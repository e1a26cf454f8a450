#include "client/unreachable_wait.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/rpc_retry.h"

namespace spotps {
namespace {

// gRPC's words when no process listens at an address (connection refused)
// or the name does not resolve.
bool NothingListens(const absl::Status& s) {
  return absl::IsUnavailable(s) &&
         (absl::StrContains(s.message(), "onnection refused") ||
          absl::StrContains(s.message(), "ailed to connect") ||
          absl::StrContains(s.message(), "DNS resolution failed"));
}

}  // namespace

bool IsUnreachable(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

UnreachableWait::UnreachableWait(std::string what, absl::Duration timeout)
    : what_(std::move(what)), timeout_(timeout), start_(absl::Now()) {}

UnreachableWait& UnreachableWait::WaitForModel() {
  wait_for_model_ = true;
  return *this;
}

UnreachableWait& UnreachableWait::ReportTo(std::function<void(const std::string&)> report) {
  report_ = std::move(report);
  return *this;
}

UnreachableWait& UnreachableWait::ReportEvery(absl::Duration interval) {
  report_every_ = interval;
  return *this;
}

UnreachableWait& UnreachableWait::Until(const std::atomic<bool>* stop) {
  stop_ = stop;
  return *this;
}

bool UnreachableWait::ShouldWait(const absl::Status& s) const {
  return IsUnreachable(s) || (wait_for_model_ && absl::IsFailedPrecondition(s));
}

absl::Status UnreachableWait::Retry(const std::function<absl::Status()>& attempt) {
  const absl::Time give_up = start_ + timeout_;
  // The first line comes early (someone may be watching a silent
  // terminal); a blip shorter than that stays quiet.
  absl::Time next_report = absl::Now() + std::min(report_every_, absl::Seconds(2));
  absl::Duration backoff = absl::Milliseconds(200);
  while (true) {
    absl::Status s = attempt();
    if (s.ok() || !ShouldWait(s) || (stop_ != nullptr && stop_->load())) return s;
    const absl::Time now = absl::Now();
    if (now >= give_up) return GiveUp(s);
    if (now >= next_report) {
      const std::string line = absl::StrFormat(
          "waiting for %s (%.0f s of %.0f s): %s", what_, absl::ToDoubleSeconds(now - start_),
          absl::ToDoubleSeconds(timeout_), s.message());
      report_ ? report_(line) : LogInfo(line);
      next_report = now + report_every_;
    }
    // Short sleeps, so that a stop is seen within 100 ms.
    const absl::Time wake = std::min(now + JitteredBackoff(backoff), give_up);
    while (absl::Now() < wake && !(stop_ != nullptr && stop_->load())) {
      absl::SleepFor(std::min(wake - absl::Now(), absl::Milliseconds(100)));
    }
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

absl::Status UnreachableWait::GiveUp(const absl::Status& last) const {
  std::string message =
      absl::StrFormat("gave up after %.0f s waiting for %s", absl::ToDoubleSeconds(absl::Now() - start_),
                      what_);
  if (NothingListens(last)) {
    absl::StrAppend(&message, " (nothing listens there: is the job running, and is the address right?)");
  } else if (absl::IsFailedPrecondition(last)) {
    absl::StrAppend(&message, " (the shards answer but hold no model yet)");
  }
  absl::StrAppend(&message, ": ", last.message());
  return absl::Status(last.code(), message);
}

}  // namespace spotps
