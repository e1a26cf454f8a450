// SpotNoticeWatcher: tells a trainer on a spot (preemptible) instance that
// the instance is about to be taken back, so it can drain before it is
// killed. It polls the instance-metadata service of one cloud: EC2
// (IMDSv2), GCE or Azure (spot_notice_sources.h has what each answers).
// Failures (refused connections, timeouts, 5xx, bodies that are not the
// service's) are never a notice: they are counted and polling goes on.
#ifndef SPOTPS_TRAINER_ELASTIC_SPOT_NOTICE_WATCHER_H_
#define SPOTPS_TRAINER_ELASTIC_SPOT_NOTICE_WATCHER_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "trainer/elastic/spot_notice_sources.h"

namespace spotps {

// Owns a polling thread, its io_context and what it caches between polls
// (the IMDSv2 token, the Azure VM name).
// Promises: on_notice runs at most once, for the first notice seen, on the
// polling thread; no request outlives request_timeout; Stop() is prompt.
//
// All methods are thread-safe. on_notice should only hand the news on (set
// a flag, notify a condition variable): while it runs nothing else polls,
// and it must not destroy the watcher, though it may call Stop().
class SpotNoticeWatcher {
 public:
  using NoticeCallback = std::function<void(const SpotNotice&)>;
  struct Options {
    SpotNoticeSource source = SpotNoticeSource::kAws;
    // http://ADDRESS[:PORT] with an optional trailing "/"; ADDRESS is an IP
    // literal ("[...]" for IPv6), so no request ever waits on DNS. All
    // three clouds serve at the default.
    std::string metadata_url = "http://169.254.169.254";
    absl::Duration poll_interval = absl::Seconds(5);
    // Deadline for each HTTP exchange: connect, send and receive.
    absl::Duration request_timeout = absl::Seconds(2);
    // Lifetime asked for each token; IMDS accepts 1..21600.
    int token_ttl_s = 21600;
    // AWS only, optional: called once, on the polling thread, for the first
    // rebalance recommendation (which is not a notice: polling goes on).
    NoticeCallback on_rebalance;
  };

  // InvalidArgument for a malformed URL, non-positive durations or a TTL
  // IMDS would refuse. Does no I/O: an unreachable service is found by
  // polling.
  static absl::StatusOr<std::unique_ptr<SpotNoticeWatcher>> Create(Options options,
                                                                   NoticeCallback on_notice);
  // Stops, as Stop() does.
  ~SpotNoticeWatcher();

  SpotNoticeWatcher(const SpotNoticeWatcher&) = delete;
  SpotNoticeWatcher& operator=(const SpotNoticeWatcher&) = delete;

  // Starts the polling thread: it polls every poll_interval until the first
  // notice, which it hands to on_notice and then exits, or until Stop().
  // Later calls do nothing.
  void Start();

  // Cancels any request in flight and joins the polling thread. Final: the
  // watcher never polls again and PollOnce() returns CANCELLED. Idempotent,
  // and safe to call from on_notice (the destructor then does the join).
  void Stop();

  // One synchronous poll: a notice, nullopt for "no notice", or the error
  // that prevented an answer (DEADLINE_EXCEEDED for a request that ran out
  // of time, UNAVAILABLE for refused connections and unexpected statuses,
  // CANCELLED once stopped). Does not invoke on_notice. Thread-safe: polls
  // from several threads run one at a time.
  absl::StatusOr<std::optional<SpotNotice>> PollOnce();

  // Polls attempted and polls that ended in an error, by any caller.
  int64_t polls() const { return polls_.load(); }
  int64_t errors() const { return errors_.load(); }
  // Tokens requested from the service (first one, refreshes and 401s).
  int64_t token_fetches() const { return token_fetches_.load(); }
  // True once on_notice has been invoked.
  bool notified() const { return notified_.load(); }
  // The error of the most recent failed poll, OK if none failed yet.
  absl::Status last_error() const;

 private:
  // Defined in the .cc, which keeps Boost.Beast out of this header.
  struct HttpRequest;
  struct HttpResponse;
  class HttpExchange;

  SpotNoticeWatcher(Options options, boost::asio::ip::tcp::endpoint endpoint,
                    std::string host_header, NoticeCallback on_notice);

  void RunPollingLoop();
  // Sleeps for poll_interval; false if Stop() was called meanwhile.
  bool WaitBeforeNextPoll();

  absl::StatusOr<std::optional<SpotNotice>> PollAws() ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  absl::StatusOr<std::optional<SpotNotice>> PollGce() ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  absl::StatusOr<std::optional<SpotNotice>> PollAzure() ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  // Reports the first rebalance recommendation to on_rebalance. Best
  // effort: its failures leave the poll's answer as it was.
  void CheckRebalance() ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  // A GET with the IMDSv2 token, fetching a new one on a 401 once.
  absl::StatusOr<HttpResponse> GetWithToken(absl::string_view path)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  absl::StatusOr<std::string> CurrentToken() ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  absl::StatusOr<std::string> FetchToken() ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  // One HTTP exchange on io_, bounded by request_timeout; CANCELLED once
  // Stop() has been called.
  absl::StatusOr<HttpResponse> Send(const HttpRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  void RecordError(const absl::Status& status);

  const Options options_;
  const boost::asio::ip::tcp::endpoint endpoint_;
  const std::string host_header_;
  const NoticeCallback on_notice_;

  // Serializes polls: the token cache and io_ serve one poll at a time.
  absl::Mutex poll_mu_;
  // Only run() inside Send(); once stopped it is never run again, so the
  // handlers a cancelled exchange leaves behind are destroyed, not invoked.
  boost::asio::io_context io_;
  std::string token_ ABSL_GUARDED_BY(poll_mu_);
  absl::Time token_refresh_at_ ABSL_GUARDED_BY(poll_mu_) = absl::InfinitePast();
  std::string azure_vm_name_ ABSL_GUARDED_BY(poll_mu_);  // "" until known.
  bool rebalance_reported_ ABSL_GUARDED_BY(poll_mu_) = false;

  // Guards the stop flag (so that no io_.restart() can follow Stop()'s
  // io_.stop()) and doubles as the polling thread's interruptible sleep.
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);

  std::atomic<int64_t> polls_{0};
  std::atomic<int64_t> errors_{0};
  std::atomic<int64_t> token_fetches_{0};
  std::atomic<bool> notified_{false};

  absl::Mutex lifecycle_mu_;
  std::thread thread_ ABSL_GUARDED_BY(lifecycle_mu_);
  // Lets Stop() recognize a call from on_notice.
  std::atomic<std::thread::id> polling_thread_id_{};
};

}  // namespace spotps

#endif  // SPOTPS_TRAINER_ELASTIC_SPOT_NOTICE_WATCHER_H_
