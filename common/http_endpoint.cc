#include "common/http_endpoint.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace spotps {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr size_t kHeaderLimit = 8 * 1024;
constexpr auto kIdleTimeout = std::chrono::seconds(10);

using Handlers = std::map<std::string, HttpHandler>;

http::response<http::string_body> Respond(const http::request_parser<http::empty_body>& parser,
                                          const Handlers& handlers) {
  const auto& request = parser.get();
  HttpReply reply;
  std::string path(request.target());
  path = path.substr(0, path.find('?'));
  const bool known_method =
      request.method() == http::verb::get || request.method() == http::verb::head;
  auto handler = handlers.find(path);
  if (!known_method) {
    reply = {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
  } else if (handler == handlers.end()) {
    reply = {404, "text/plain; charset=utf-8", absl::StrCat("no page at ", path, "\n")};
  } else {
    reply = handler->second();
  }
  http::response<http::string_body> response(static_cast<http::status>(reply.status),
                                             request.version());
  response.set(http::field::server, "spotps");
  response.set(http::field::content_type, reply.content_type);
  response.set(http::field::cache_control, "no-store");
  if (reply.status == 405) response.set(http::field::allow, "GET, HEAD");
  response.keep_alive(request.keep_alive());
  response.body() = std::move(reply.body);
  response.prepare_payload();
  if (request.method() == http::verb::head) response.body().clear();  // Length stays.
  return response;
}

// One connection: read a request, answer, repeat while keep-alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const Handlers* handlers)
      : stream_(std::move(socket)), handlers_(handlers) {}

  void Read() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(0);  // Nothing we serve takes a body.
    stream_.expires_after(kIdleTimeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(beast::error_code ec) {
    if (ec == http::error::body_limit) return Fail(413, "request bodies are not accepted\n");
    if (ec == http::error::header_limit) return Fail(431, "request headers over 8 KiB\n");
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::eof) {
      return Close();
    }
    if (ec) return Fail(400, "malformed request\n");
    response_ = Respond(*parser_, *handlers_);
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec || !self->response_.keep_alive()) return self->Close();
                        self->Read();
                      });
  }

  void Fail(int status, const std::string& body) {
    response_ = http::response<http::string_body>(static_cast<http::status>(status), 11);
    response_.set(http::field::content_type, "text/plain; charset=utf-8");
    response_.keep_alive(false);
    response_.body() = body;
    response_.prepare_payload();
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code, size_t) { self->Close(); });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  beast::tcp_stream stream_;
  const Handlers* const handlers_;
  beast::flat_buffer buffer_{kHeaderLimit};
  std::optional<http::request_parser<http::empty_body>> parser_;
  http::response<http::string_body> response_;
};

}  // namespace

struct HttpEndpoint::State {
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  Handlers handlers;
  std::thread thread;
  int port = 0;

  void Accept() {
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) std::make_shared<Session>(std::move(socket), &handlers)->Read();
      Accept();
    });
  }
};

absl::Status HttpEndpoint::CheckListenAddress(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", listen, "' is not host:port (port 0 picks a free one)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(const std::string& listen,
                                                                  Handlers handlers) {
  if (absl::Status s = CheckListenAddress(listen); !s.ok()) return s;
  const size_t colon = listen.rfind(':');
  const int port = std::stoi(listen.substr(colon + 1));
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  auto state = std::make_unique<State>();
  state->handlers = std::move(handlers);
  beast::error_code ec;
  tcp::resolver resolver(state->io);
  auto endpoints = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve '", host, "' of --metrics_listen: ", ec.message()));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  state->acceptor.open(endpoint.protocol(), ec);
  if (!ec) state->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) state->acceptor.bind(endpoint, ec);
  if (!ec) state->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, ": ", ec.message()));
  }
  state->port = state->acceptor.local_endpoint().port();
  state->Accept();
  State* raw = state.get();
  state->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<HttpEndpoint>(new HttpEndpoint(std::move(state)));
}

HttpEndpoint::HttpEndpoint(std::unique_ptr<State> state) : state_(std::move(state)) {}

HttpEndpoint::~HttpEndpoint() { Stop(); }

int HttpEndpoint::port() const { return state_->port; }

void HttpEndpoint::Stop() {
  if (!state_->thread.joinable()) return;
  asio::post(state_->io, [s = state_.get()] {
    beast::error_code ignored;
    s->acceptor.close(ignored);
  });
  state_->io.stop();  // Open sessions are abandoned; their sockets close with the context.
  state_->thread.join();
}

}  // namespace spotps
