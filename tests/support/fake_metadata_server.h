// FakeMetadataServer: the instance-metadata services of EC2 (IMDSv2), GCE
// and Azure, as far as spot interruption notices go, all on one real
// loopback socket so that tests and child processes (--metadata_url=url())
// can talk to it.
//
//   PUT /latest/api/token   needs X-aws-ec2-metadata-token-ttl-seconds in
//                           [1, 21600] (400 otherwise); returns a new token.
//   GET /latest/meta-data/spot/instance-action
//                           needs X-aws-ec2-metadata-token with a live token
//                           (401 otherwise); 404 until ScheduleNotice(),
//                           then 200 {"action": ..., "time": ...}.
//   GET /latest/meta-data/events/recommendations/rebalance
//                           the same token; 404 until ScheduleRebalance(),
//                           then 200 {"noticeTime": ...}.
//   GET /computeMetadata/v1/instance/preempted
//                           needs Metadata-Flavor: Google (403 otherwise);
//                           200 "FALSE", or SetGcePreempted()'s body.
//   GET /metadata/scheduledevents?api-version=...
//                           needs Metadata: true and an api-version (400
//                           otherwise); 200 with no events, or
//                           SetAzureEvents()'s body.
//   GET /metadata/instance/compute/name?...
//                           needs Metadata: true; 200 kAzureVmName.
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
    int64_t rebalance_gets = 0;     // requests for .../recommendations/rebalance
    int64_t gce_gets = 0;           // requests for GCE's instance/preempted
    int64_t azure_gets = 0;         // requests for Azure's scheduledevents
    int64_t unauthorized = 0;       // answered 401
    int64_t injected_failures = 0;  // answered with SetFailStatus's status
    int64_t other = 0;              // unknown paths (404)
  };

  static constexpr char kAzureVmName[] = "spotps-test-vm";

  static absl::StatusOr<std::unique_ptr<FakeMetadataServer>> Start();
  ~FakeMetadataServer();

  FakeMetadataServer(const FakeMetadataServer&) = delete;
  FakeMetadataServer& operator=(const FakeMetadataServer&) = delete;

  int port() const { return port_; }
  // "http://127.0.0.1:PORT", for SpotNoticeWatcher::Options::metadata_url.
  std::string url() const;

  // From now on instance-action answers 200 with this notice.
  void ScheduleNotice(const std::string& action, const std::string& time);
  // From now on the rebalance recommendation answers 200 with this time.
  void ScheduleRebalance(const std::string& notice_time);
  // GCE's instance/preempted answers this body ("TRUE", or a bad one).
  void SetGcePreempted(const std::string& body);
  // Azure's scheduledevents answers this body (a document, or a bad one).
  void SetAzureEvents(const std::string& body);
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
  // What a handler looks at in a request.
  struct Request {
    std::string method, target;
    std::string ttl, token;          // IMDSv2's headers.
    std::string flavor, metadata;    // GCE's and Azure's headers.
  };
  // Counts one request and decides its answer and when to send it.
  Reply Answer(const Request& request);
  Reply Route(const Request& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Reply IssueToken(const Request& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // IMDSv2's GETs: a live token, then `body` or 404 without one.
  Reply WithToken(const Request& request, const std::optional<std::string>& body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Reply Gce(const Request& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Reply Azure(const Request& request, bool name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

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
  std::optional<std::string> rebalance_body_ ABSL_GUARDED_BY(mu_);
  std::string gce_body_ ABSL_GUARDED_BY(mu_) = "FALSE";
  std::string azure_body_ ABSL_GUARDED_BY(mu_) = R"({"DocumentIncarnation": 0, "Events": []})";
  absl::Duration delay_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  int fail_status_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace spotps::testing

#endif  // SPOTPS_TESTS_SUPPORT_FAKE_METADATA_SERVER_H_
