// FakeMetadataServer: the EC2 instance metadata service (IMDSv2), as far as
// spot interruption notices go, on a real loopback socket so that tests and
// child processes (--metadata_url=url()) can both talk to it.
//
//   PUT /latest/api/token   needs X-aws-ec2-metadata-token-ttl-seconds in
//                           [1, 21600] (400 otherwise); returns a new token.
//   GET /latest/meta-data/spot/instance-action
//                           needs X-aws-ec2-metadata-token with a live token
//                           (401 otherwise); 404 until ScheduleNotice(),
//                           then 200 {"action": ..., "time": ...}.
#ifndef SPOTPS_TESTS_SUPPORT_FAKE_METADATA_SERVER_H_
#define SPOTPS_TESTS_SUPPORT_FAKE_METADATA_SERVER_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace spotps::testing {

// Owns a listening socket on 127.0.0.1 (ephemeral port) served by its own
// thread. Promises: the controls below take effect for the next request;
// the destructor closes the port and joins the thread.
class FakeMetadataServer {
 public:
  // What the server has been asked, by endpoint and by outcome.
  struct Requests {
    int64_t token_puts = 0;         // requests for /latest/api/token
    int64_t action_gets = 0;        // requests for .../spot/instance-action
    int64_t unauthorized = 0;       // answered 401
    int64_t injected_failures = 0;  // answered with SetFailStatus's status
    int64_t other = 0;              // unknown paths (404)
  };

  static absl::StatusOr<std::unique_ptr<FakeMetadataServer>> Start();
  ~FakeMetadataServer();

  FakeMetadataServer(const FakeMetadataServer&) = delete;
  FakeMetadataServer& operator=(const FakeMetadataServer&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:PORT", for SpotNoticeWatcher::Options::metadata_url.
  std::string url() const;

  // From now on instance-action answers 200 with this notice.
  void ScheduleNotice(const std::string& action, const std::string& time);
  // Every token issued so far is refused (401) from now on.
  void ExpireTokens();
  // Each answer is sent `delay` after its request arrived.
  void SetDelay(absl::Duration delay);
  // Every request is answered with `status` (e.g. 500); 0 restores service.
  void SetFailStatus(int status);
  Requests requests() const;

 private:
  // Defined in the .cc, which keeps Boost.Beast out of this header.
  class Session;
  struct Reply;

  FakeMetadataServer() = default;
  void Accept();
  // Counts one request and decides its answer and when to send it.
  Reply Answer(const std::string& method, const std::string& target, const std::string& ttl,
               const std::string& token);
  Reply Route(const std::string& method, const std::string& target, const std::string& ttl,
              const std::string& token) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Reply IssueToken(const std::string& method, const std::string& ttl)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Reply InstanceAction(const std::string& method, const std::string& token)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Declared before the acceptor, which must close before it goes away.
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_{io_};
  int port_ = 0;
  std::thread thread_;

  mutable absl::Mutex mu_;
  Requests requests_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Time> token_expiry_ ABSL_GUARDED_BY(mu_);
  int64_t tokens_issued_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<std::string> notice_body_ ABSL_GUARDED_BY(mu_);
  absl::Duration delay_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  int fail_status_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace spotps::testing

#endif  // SPOTPS_TESTS_SUPPORT_FAKE_METADATA_SERVER_H_
