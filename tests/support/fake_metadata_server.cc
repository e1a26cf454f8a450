#include "tests/support/fake_metadata_server.h"

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace spotps::testing {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr char kTokenPath[] = "/latest/api/token";
constexpr char kInstanceActionPath[] = "/latest/meta-data/spot/instance-action";
constexpr char kRebalancePath[] = "/latest/meta-data/events/recommendations/rebalance";
constexpr char kGcePreemptedPath[] = "/computeMetadata/v1/instance/preempted";
constexpr char kAzureEventsPath[] = "/metadata/scheduledevents";
constexpr char kAzureNamePath[] = "/metadata/instance/compute/name";
constexpr char kTokenTtlHeader[] = "X-aws-ec2-metadata-token-ttl-seconds";
constexpr char kTokenHeader[] = "X-aws-ec2-metadata-token";
constexpr int kMaxTokenTtlSeconds = 21600;

std::string HeaderValue(const http::request<http::string_body>& request, const char* name) {
  auto it = request.find(name);
  return it == request.end() ? std::string() : std::string(it->value());
}

}  // namespace

struct FakeMetadataServer::Reply {
  Reply(int status, std::string body, std::string content_type = "text/plain")
      : status(status), body(std::move(body)), content_type(std::move(content_type)) {}

  int status;
  std::string body;
  std::string content_type;
  absl::Duration delay;  // Answer() sets it
};

// Owns one accepted connection; keeps itself alive through its pending
// handlers. Promises: answers requests in order until the peer hangs up.
class FakeMetadataServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, FakeMetadataServer* server)
      : socket_(std::move(socket)), delay_timer_(socket_.get_executor()), server_(server) {}

  void ReadRequest() {
    request_ = {};
    http::async_read(
        socket_, buffer_, request_,
        [self = shared_from_this()](boost::system::error_code ec, size_t) { self->OnRequest(ec); });
  }

 private:
  void OnRequest(boost::system::error_code ec) {
    if (ec) return;  // the peer hung up or sent garbage: drop the connection
    Reply reply = server_->Answer(Request{
        std::string(request_.method_string()), std::string(request_.target()),
        HeaderValue(request_, kTokenTtlHeader), HeaderValue(request_, kTokenHeader),
        HeaderValue(request_, "Metadata-Flavor"), HeaderValue(request_, "Metadata")});
    response_ = {static_cast<http::status>(reply.status), request_.version()};
    response_.set(http::field::content_type, reply.content_type);
    response_.keep_alive(request_.keep_alive());
    response_.body() = std::move(reply.body);
    response_.prepare_payload();
    delay_timer_.expires_after(absl::ToChronoNanoseconds(reply.delay));
    delay_timer_.async_wait(
        [self = shared_from_this()](boost::system::error_code) { self->WriteResponse(); });
  }

  void WriteResponse() {
    http::async_write(socket_, response_,
                      [self = shared_from_this()](boost::system::error_code ec, size_t) {
                        if (ec || !self->response_.keep_alive()) return;
                        self->ReadRequest();
                      });
  }

  tcp::socket socket_;
  asio::steady_timer delay_timer_;
  FakeMetadataServer* server_;
  boost::beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
};

absl::StatusOr<std::unique_ptr<FakeMetadataServer>> FakeMetadataServer::Start() {
  std::unique_ptr<FakeMetadataServer> server(new FakeMetadataServer());
  const tcp::endpoint loopback(asio::ip::address_v4::loopback(), 0);
  boost::system::error_code ec;
  server->acceptor_.open(loopback.protocol(), ec);
  if (!ec) server->acceptor_.bind(loopback, ec);
  if (!ec) server->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return absl::InternalError(absl::StrCat("fake metadata server: ", ec.message()));
  server->port_ = server->acceptor_.local_endpoint().port();
  server->Accept();
  server->thread_ = std::thread([raw = server.get()] { raw->io_.run(); });
  return server;
}

FakeMetadataServer::~FakeMetadataServer() {
  // Pending sessions are destroyed with io_, after the thread is gone.
  io_.stop();
  thread_.join();
}

std::string FakeMetadataServer::url() const { return absl::StrCat("http://127.0.0.1:", port_); }

void FakeMetadataServer::ScheduleNotice(const std::string& action, const std::string& time) {
  absl::MutexLock lock(&mu_);
  notice_body_ = absl::StrCat("{\"action\": \"", action, "\", \"time\": \"", time, "\"}");
}

void FakeMetadataServer::ScheduleRebalance(const std::string& notice_time) {
  absl::MutexLock lock(&mu_);
  rebalance_body_ = absl::StrCat("{\"noticeTime\": \"", notice_time, "\"}");
}

void FakeMetadataServer::SetGcePreempted(const std::string& body) {
  absl::MutexLock lock(&mu_);
  gce_body_ = body;
}

void FakeMetadataServer::SetAzureEvents(const std::string& body) {
  absl::MutexLock lock(&mu_);
  azure_body_ = body;
}

void FakeMetadataServer::ExpireTokens() {
  absl::MutexLock lock(&mu_);
  token_expiry_.clear();
}

void FakeMetadataServer::SetDelay(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  delay_ = delay;
}

void FakeMetadataServer::SetFailStatus(int status) {
  absl::MutexLock lock(&mu_);
  fail_status_ = status;
}

FakeMetadataServer::Requests FakeMetadataServer::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

void FakeMetadataServer::Accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) std::make_shared<Session>(std::move(socket), this)->ReadRequest();
    Accept();
  });
}

FakeMetadataServer::Reply FakeMetadataServer::Answer(const Request& request) {
  absl::MutexLock lock(&mu_);
  const std::string path = request.target.substr(0, request.target.find('?'));
  if (path == kTokenPath) {
    ++requests_.token_puts;
  } else if (path == kInstanceActionPath) {
    ++requests_.action_gets;
  } else if (path == kRebalancePath) {
    ++requests_.rebalance_gets;
  } else if (path == kGcePreemptedPath) {
    ++requests_.gce_gets;
  } else if (path == kAzureEventsPath) {
    ++requests_.azure_gets;
  } else if (path != kAzureNamePath) {
    ++requests_.other;
  }
  Reply reply = Route(request);
  reply.delay = delay_;
  return reply;
}

FakeMetadataServer::Reply FakeMetadataServer::Route(const Request& request) {
  // Injected failures come first so that they have no side effect.
  if (fail_status_ != 0) {
    ++requests_.injected_failures;
    return Reply{fail_status_, "injected failure"};
  }
  const std::string path = request.target.substr(0, request.target.find('?'));
  if (path == kTokenPath) return IssueToken(request);
  if (path == kInstanceActionPath) return WithToken(request, notice_body_);
  if (path == kRebalancePath) return WithToken(request, rebalance_body_);
  if (path == kGcePreemptedPath) return Gce(request);
  if (path == kAzureEventsPath) return Azure(request, false);
  if (path == kAzureNamePath) return Azure(request, true);
  return Reply{404, "Not Found"};
}

FakeMetadataServer::Reply FakeMetadataServer::IssueToken(const Request& request) {
  if (request.method != "PUT") return Reply{405, "Method Not Allowed"};
  int ttl_s = 0;
  if (!absl::SimpleAtoi(request.ttl, &ttl_s) || ttl_s < 1 || ttl_s > kMaxTokenTtlSeconds) {
    return Reply{400, "Bad Request"};
  }
  std::string token = absl::StrCat("fake-token-", ++tokens_issued_);
  token_expiry_[token] = absl::Now() + absl::Seconds(ttl_s);
  return Reply{200, std::move(token)};
}

FakeMetadataServer::Reply FakeMetadataServer::WithToken(const Request& request,
                                                        const std::optional<std::string>& body) {
  if (request.method != "GET") return Reply{405, "Method Not Allowed"};
  auto it = token_expiry_.find(request.token);
  if (it == token_expiry_.end() || absl::Now() >= it->second) {
    ++requests_.unauthorized;
    return Reply{401, "Unauthorized"};
  }
  if (!body.has_value()) return Reply{404, "Not Found"};
  return Reply{200, *body, "application/json"};
}

FakeMetadataServer::Reply FakeMetadataServer::Gce(const Request& request) {
  if (request.method != "GET") return Reply{405, "Method Not Allowed"};
  if (request.flavor != "Google") return Reply{403, "Missing Metadata-Flavor:Google header."};
  return Reply{200, gce_body_};
}

FakeMetadataServer::Reply FakeMetadataServer::Azure(const Request& request, bool name) {
  if (request.method != "GET") return Reply{405, "Method Not Allowed"};
  if (request.metadata != "true" || request.target.find("api-version=") == std::string::npos) {
    return Reply{400, "Bad request. Required metadata header not specified"};
  }
  if (name) return Reply{200, kAzureVmName};
  return Reply{200, azure_body_, "application/json"};
}

}  // namespace spotps::testing
