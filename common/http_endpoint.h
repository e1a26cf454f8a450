// HttpEndpoint: a small HTTP/1.1 server (Boost.Beast) for what operators
// read from a process: /metrics for Prometheus, shard 0's status page.
#ifndef SPOTPS_COMMON_HTTP_ENDPOINT_H_
#define SPOTPS_COMMON_HTTP_ENDPOINT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace spotps {

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Answers GET (and HEAD) of one path; runs on the endpoint's thread.
using HttpHandler = std::function<HttpReply()>;

// Owns a listening socket and one thread serving it. Promises: only GET and
// HEAD of a registered path get its handler's reply (the query string is
// ignored); other methods get 405, other paths 404; a request with a body,
// headers over 8 KiB or a connection idle or slow for 10 s is cut off, so
// no client can hold memory or the thread; the destructor (or Stop) closes
// the socket and joins the thread.
class HttpEndpoint {
 public:
  // `listen` is host:port (port 0 picks a free one). Fails with
  // INVALID_ARGUMENT for a malformed address and UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& listen, std::map<std::string, HttpHandler> handlers);
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
