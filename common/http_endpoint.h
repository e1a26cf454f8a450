// HttpEndpoint: a small HTTP/1.1 server (Boost.Beast), over TLS when given a
// certificate and behind a bearer-token check when given one, for what
// operators read from a process: /metrics for Prometheus, shard 0's status
// page.
#ifndef SPOTPS_COMMON_HTTP_ENDPOINT_H_
#define SPOTPS_COMMON_HTTP_ENDPOINT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Answers GET (and HEAD) of one path; runs on the endpoint's thread.
using HttpHandler = std::function<HttpReply()>;

// What a request's bearer token earns.
enum class HttpAccess { kAllowed, kUnauthenticated, kForbidden };

// How the endpoint is reached: plain HTTP by default.
struct HttpEndpointOptions {
  // HTTPS (TLS 1.2 or later) with this PEM certificate chain and key when set.
  std::string cert_pem;
  std::string key_pem;
  // When set, decides every request by its token ("" when absent or
  // malformed): "Authorization: Bearer TOKEN", or Basic with the token as
  // the password (so a browser's login prompt reaches the status page).
  // kUnauthenticated gets 401 (challenging Bearer and Basic), kForbidden
  // 403, before any handler runs.
  std::function<HttpAccess(absl::string_view token)> authorize;
};

// Owns a listening socket and one thread serving it. Promises: only GET and
// HEAD of a registered path get its handler's reply (the query string is
// ignored), and only once `authorize` (if any) allowed the request; other
// methods get 405, other paths 404; a request with a body, headers over
// 8 KiB or a connection idle or slow for 10 s (TLS handshake included) is
// cut off, so no client can hold memory or the thread; the destructor (or
// Stop) closes the socket and joins the thread.
class HttpEndpoint {
 public:
  // `listen` is host:port (port 0 picks a free one). Fails with
  // INVALID_ARGUMENT for a malformed address or a certificate or key that
  // does not load, and UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& listen, std::map<std::string, HttpHandler> handlers,
      HttpEndpointOptions options = {});
  ~HttpEndpoint();
  // Start's INVALID_ARGUMENT check alone (for --check_flags): host:port with
  // a port in [0, 65535].
  static absl::Status CheckListenAddress(const std::string& listen);

  int port() const;
  void Stop();

 private:
  struct State;
  explicit HttpEndpoint(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace spotps

#endif  // SPOTPS_COMMON_HTTP_ENDPOINT_H_
