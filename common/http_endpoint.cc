#include "common/http_endpoint.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <chrono>
#include <optional>
#include <thread>
#include <type_traits>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace spotps {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

constexpr size_t kHeaderLimit = 8 * 1024;
constexpr auto kIdleTimeout = std::chrono::seconds(10);

using Handlers = std::map<std::string, HttpHandler>;

// What every session reads; owned by the endpoint.
struct Site {
  Handlers handlers;
  std::function<HttpAccess(absl::string_view)> authorize;
};

// The token of "Authorization: Bearer TOKEN" (Prometheus, scripts) or the
// password of "Authorization: Basic base64(USER:TOKEN)" (a browser's login
// prompt, which it then sends with the status page's own requests), or "".
std::string RequestToken(const http::request<http::empty_body>& request) {
  auto header = request.find(http::field::authorization);
  if (header == request.end()) return "";
  absl::string_view value(header->value().data(), header->value().size());
  for (absl::string_view scheme : {"Bearer ", "Basic "}) {
    if (value.size() <= scheme.size() || !absl::StartsWithIgnoreCase(value, scheme)) continue;
    const absl::string_view credentials = value.substr(scheme.size());
    if (scheme == "Bearer ") return std::string(credentials);
    std::string user_and_password;
    if (!absl::Base64Unescape(credentials, &user_and_password)) return "";
    const size_t colon = user_and_password.find(':');
    return colon == std::string::npos ? "" : user_and_password.substr(colon + 1);
  }
  return "";
}

// The refusal of a request its token does not admit; nullopt to admit it.
std::optional<HttpReply> Refusal(const http::request<http::empty_body>& request, const Site& site) {
  if (site.authorize == nullptr) return std::nullopt;
  switch (site.authorize(RequestToken(request))) {
    case HttpAccess::kAllowed:
      return std::nullopt;
    case HttpAccess::kUnauthenticated:
      return HttpReply{401, "text/plain; charset=utf-8", "a bearer token is required\n"};
    case HttpAccess::kForbidden:
      return HttpReply{403, "text/plain; charset=utf-8", "this token may not read metrics\n"};
  }
  return HttpReply{403, "text/plain; charset=utf-8", "refused\n"};
}

http::response<http::string_body> Respond(const http::request_parser<http::empty_body>& parser,
                                          const Site& site) {
  const auto& request = parser.get();
  HttpReply reply;
  std::string path(request.target());
  path = path.substr(0, path.find('?'));
  const bool known_method =
      request.method() == http::verb::get || request.method() == http::verb::head;
  auto handler = site.handlers.find(path);
  if (std::optional<HttpReply> refusal = Refusal(request, site)) {
    reply = *std::move(refusal);
  } else if (!known_method) {
    reply = {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
  } else if (handler == site.handlers.end()) {
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
  if (reply.status == 401) {
    response.insert(http::field::www_authenticate, "Bearer realm=\"spotps\"");
    response.insert(http::field::www_authenticate, "Basic realm=\"spotps\", charset=\"UTF-8\"");
  }
  response.keep_alive(request.keep_alive());
  response.body() = std::move(reply.body);
  response.prepare_payload();
  if (request.method() == http::verb::head) response.body().clear();  // Length stays.
  return response;
}

// One connection: read a request, answer, repeat while keep-alive. Stream
// is beast::tcp_stream, or an ssl_stream over one (handshake first).
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, const Site* site) : stream_(std::move(stream)), site_(site) {}

  void Start() {
    if constexpr (kTls) {
      Lowest().expires_after(kIdleTimeout);
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->Close();
                                self->Read();
                              });
    } else {
      Read();
    }
  }

 private:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void Read() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(0);  // Nothing we serve takes a body.
    Lowest().expires_after(kIdleTimeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::body_limit) return Fail(413, "request bodies are not accepted\n");
    if (ec == http::error::header_limit) return Fail(431, "request headers over 8 KiB\n");
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::eof) {
      return Close();
    }
    if (ec) return Fail(400, "malformed request\n");
    response_ = Respond(*parser_, *site_);
    Lowest().expires_after(kIdleTimeout);
    http::async_write(stream_, response_,
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
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
    Lowest().expires_after(kIdleTimeout);
    http::async_write(
        stream_, response_,
        [self = this->shared_from_this()](beast::error_code, size_t) { self->Close(); });
  }

  // No TLS close_notify: a reader that got its whole response has what it
  // came for, and one that stalls must not hold the thread.
  void Close() {
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  Stream stream_;
  const Site* const site_;
  beast::flat_buffer buffer_{kHeaderLimit};
  std::optional<http::request_parser<http::empty_body>> parser_;
  http::response<http::string_body> response_;
};

// The server side of TLS 1.2 and later with `options`' certificate and key.
absl::StatusOr<std::unique_ptr<ssl::context>> TlsContext(const HttpEndpointOptions& options) {
  auto context = std::make_unique<ssl::context>(ssl::context::tls_server);
  beast::error_code ec;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                       ec);
  if (!ec) context->use_certificate_chain(asio::buffer(options.cert_pem), ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("TLS certificate: ", ec.message()));
  context->use_private_key(asio::buffer(options.key_pem), ssl::context::pem, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("TLS key: ", ec.message()));
  return context;
}

}  // namespace

struct HttpEndpoint::State {
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  Site site;
  std::unique_ptr<ssl::context> tls;  // Null: plain HTTP.
  std::thread thread;
  int port = 0;

  void Accept() {
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec && tls != nullptr) {
        using TlsStream = beast::ssl_stream<beast::tcp_stream>;
        std::make_shared<Session<TlsStream>>(TlsStream(std::move(socket), *tls), &site)->Start();
      } else if (!ec) {
        std::make_shared<Session<beast::tcp_stream>>(beast::tcp_stream(std::move(socket)), &site)
            ->Start();
      }
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
                                                                  Handlers handlers,
                                                                  HttpEndpointOptions options) {
  if (absl::Status s = CheckListenAddress(listen); !s.ok()) return s;
  const size_t colon = listen.rfind(':');
  const int port = std::stoi(listen.substr(colon + 1));
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  auto state = std::make_unique<State>();
  state->site = Site{std::move(handlers), std::move(options.authorize)};
  if (!options.cert_pem.empty() || !options.key_pem.empty()) {
    absl::StatusOr<std::unique_ptr<ssl::context>> tls = TlsContext(options);
    if (!tls.ok()) return tls.status();
    state->tls = *std::move(tls);
  }
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
