#include "trainer/elastic/spot_notice_watcher.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace spotps {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr absl::string_view kTokenPath = "/latest/api/token";
constexpr absl::string_view kInstanceActionPath = "/latest/meta-data/spot/instance-action";
constexpr absl::string_view kRebalancePath = "/latest/meta-data/events/recommendations/rebalance";
constexpr absl::string_view kTokenTtlHeader = "X-aws-ec2-metadata-token-ttl-seconds";
constexpr absl::string_view kTokenHeader = "X-aws-ec2-metadata-token";
constexpr absl::string_view kGcePreemptedPath = "/computeMetadata/v1/instance/preempted";
constexpr absl::string_view kGceHeader = "Metadata-Flavor";
constexpr absl::string_view kAzureEventsPath = "/metadata/scheduledevents?api-version=2020-07-01";
constexpr absl::string_view kAzureNamePath =
    "/metadata/instance/compute/name?api-version=2021-02-01&format=text";
constexpr absl::string_view kAzureHeader = "Metadata";
constexpr int kMaxTokenTtlSeconds = 21600;
// Instance-action bodies are a few dozen bytes; anything bigger is not IMDS.
constexpr uint64_t kMaxBodyBytes = 64 * 1024;

// Where the metadata service listens, from Options::metadata_url.
struct MetadataEndpoint {
  tcp::endpoint endpoint;
  std::string host_header;  // the authority, as HTTP/1.1 wants it
};

absl::Status BadUrl(absl::string_view why, absl::string_view url) {
  return absl::InvalidArgumentError(absl::StrCat("metadata_url ", why, ", got \"", url, "\""));
}

// Splits "ADDRESS[:PORT]" or "[IPV6][:PORT]" into address and port text.
absl::StatusOr<std::pair<absl::string_view, absl::string_view>> SplitAuthority(
    absl::string_view authority, absl::string_view url) {
  absl::string_view rest = authority;
  absl::string_view address;
  if (absl::ConsumePrefix(&rest, "[")) {
    const size_t close = rest.find(']');
    if (close == absl::string_view::npos) return BadUrl("has an unclosed '['", url);
    address = rest.substr(0, close);
    rest.remove_prefix(close + 1);
  } else {
    address = rest.substr(0, rest.find(':'));
    rest.remove_prefix(address.size());
  }
  if (rest.empty()) return std::make_pair(address, absl::string_view("80"));
  if (!absl::ConsumePrefix(&rest, ":")) return BadUrl("has junk after the address", url);
  return std::make_pair(address, rest);
}

absl::StatusOr<MetadataEndpoint> ParseMetadataUrl(absl::string_view url) {
  absl::string_view authority = url;
  if (!absl::ConsumePrefix(&authority, "http://")) return BadUrl("must start with http://", url);
  absl::ConsumeSuffix(&authority, "/");
  absl::StatusOr<std::pair<absl::string_view, absl::string_view>> parts =
      SplitAuthority(authority, url);
  if (!parts.ok()) return parts.status();
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(std::string(parts->first), ec);
  if (ec) return BadUrl("needs an IP address for its host and no path", url);
  uint32_t port = 0;
  if (!absl::SimpleAtoi(parts->second, &port) || port == 0 || port > 65535) {
    return BadUrl("has a bad port", url);
  }
  return MetadataEndpoint{tcp::endpoint(address, static_cast<uint16_t>(port)),
                          std::string(authority)};
}

absl::Status ValidateOptions(const SpotNoticeWatcher::Options& options) {
  if (options.poll_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("poll_interval must be positive");
  }
  if (options.request_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("request_timeout must be positive");
  }
  if (options.token_ttl_s < 1 || options.token_ttl_s > kMaxTokenTtlSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token_ttl_s must be in [1, ", kMaxTokenTtlSeconds, "], got ", options.token_ttl_s));
  }
  return absl::OkStatus();
}

// How long a token is used before a new one is fetched: a little short of
// its TTL, so clock skew and slow polls never present an expired token.
absl::Duration TokenUseTime(int ttl_s) {
  const absl::Duration ttl = absl::Seconds(ttl_s);
  return ttl - std::min(ttl / 4, absl::Seconds(60));
}

absl::Status UnexpectedHttpStatus(absl::string_view what, int status) {
  return absl::UnavailableError(
      absl::StrCat("metadata service answered ", what, " with HTTP ", status));
}

absl::StatusOr<std::optional<SpotNotice>> InterpretInstanceAction(int status,
                                                                  const std::string& body) {
  switch (status) {
    case 200:
      return ParseAwsInstanceAction(body);
    case 404:
      return std::nullopt;
    case 401:
      return absl::UnauthenticatedError("metadata service rejected a fresh token");
    default:
      return UnexpectedHttpStatus("GET instance-action", status);
  }
}

}  // namespace

struct SpotNoticeWatcher::HttpRequest {
  http::verb method;
  absl::string_view target;
  absl::string_view header_name;
  std::string header_value;
};

struct SpotNoticeWatcher::HttpResponse {
  int status = 0;
  std::string body;
};

// Owns the socket and deadline timer of one exchange, driven by the caller's
// io_context. Promises: when that context runs out of work, Result() holds
// the response or the error, DEADLINE_EXCEEDED once the timer has fired.
class SpotNoticeWatcher::HttpExchange {
 public:
  HttpExchange(asio::io_context& io, const HttpRequest& request, absl::string_view host_header,
               absl::Duration timeout)
      : socket_(io), deadline_(io), timeout_(timeout) {
    request_.method(request.method);
    request_.target(boost::beast::string_view(request.target.data(), request.target.size()));
    request_.version(11);
    request_.set(http::field::host, std::string(host_header));
    request_.set(http::field::connection, "close");
    request_.set(boost::beast::string_view(request.header_name.data(), request.header_name.size()),
                 request.header_value);
    request_.prepare_payload();
    parser_.body_limit(kMaxBodyBytes);
  }

  void Start(const tcp::endpoint& endpoint) {
    deadline_.expires_after(absl::ToChronoNanoseconds(timeout_));
    deadline_.async_wait([this](boost::system::error_code ec) { OnDeadline(ec); });
    socket_.async_connect(endpoint, [this](boost::system::error_code ec) { OnConnected(ec); });
  }

  // CANCELLED if the io_context was stopped before the exchange finished.
  absl::StatusOr<HttpResponse> Result() const {
    if (!outcome_.has_value()) return absl::CancelledError("spot notice watcher stopped");
    if (!outcome_->ok()) return *outcome_;
    return HttpResponse{static_cast<int>(parser_.get().result_int()), parser_.get().body()};
  }

 private:
  void OnConnected(boost::system::error_code ec) {
    if (ec) return Finish(Failure("connect", ec));
    http::async_write(socket_, request_,
                      [this](boost::system::error_code ec, size_t) { OnWritten(ec); });
  }

  void OnWritten(boost::system::error_code ec) {
    if (ec) return Finish(Failure("send", ec));
    http::async_read(socket_, buffer_, parser_,
                     [this](boost::system::error_code ec, size_t) { OnRead(ec); });
  }

  void OnRead(boost::system::error_code ec) {
    Finish(ec ? Failure("receive", ec) : absl::OkStatus());
  }

  // Closing the socket aborts whichever operation is pending, and that
  // operation's handler reports the deadline.
  void OnDeadline(boost::system::error_code ec) {
    if (ec == asio::error::operation_aborted) return;
    deadline_passed_ = true;
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

  absl::Status Failure(absl::string_view step, boost::system::error_code ec) const {
    if (deadline_passed_) {
      return absl::DeadlineExceededError(absl::StrCat(
          "metadata request ", step, " timed out after ", absl::FormatDuration(timeout_)));
    }
    return absl::UnavailableError(absl::StrCat("metadata request ", step, ": ", ec.message()));
  }

  void Finish(absl::Status status) {
    outcome_ = std::move(status);
    deadline_.cancel();
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

  tcp::socket socket_;
  asio::steady_timer deadline_;
  const absl::Duration timeout_;
  http::request<http::string_body> request_;
  boost::beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
  bool deadline_passed_ = false;
  std::optional<absl::Status> outcome_;
};

absl::StatusOr<std::unique_ptr<SpotNoticeWatcher>> SpotNoticeWatcher::Create(
    Options options, NoticeCallback on_notice) {
  if (absl::Status valid = ValidateOptions(options); !valid.ok()) return valid;
  if (!on_notice) return absl::InvalidArgumentError("on_notice must be callable");
  absl::StatusOr<MetadataEndpoint> endpoint = ParseMetadataUrl(options.metadata_url);
  if (!endpoint.ok()) return endpoint.status();
  return std::unique_ptr<SpotNoticeWatcher>(new SpotNoticeWatcher(
      std::move(options), endpoint->endpoint, endpoint->host_header, std::move(on_notice)));
}

SpotNoticeWatcher::SpotNoticeWatcher(Options options, tcp::endpoint endpoint,
                                     std::string host_header, NoticeCallback on_notice)
    : options_(std::move(options)),
      endpoint_(std::move(endpoint)),
      host_header_(std::move(host_header)),
      on_notice_(std::move(on_notice)) {}

SpotNoticeWatcher::~SpotNoticeWatcher() { Stop(); }

void SpotNoticeWatcher::Start() {
  absl::MutexLock lifecycle(&lifecycle_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
  }
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { RunPollingLoop(); });
}

void SpotNoticeWatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // Makes an exchange in flight return from io_.run() at once; Send() sees
  // stopping_ before it could restart io_.
  io_.stop();
  // From on_notice: the thread ends when the callback returns, and waiting
  // for lifecycle_mu_ could deadlock with a destructor that is joining us.
  if (std::this_thread::get_id() == polling_thread_id_.load()) return;
  absl::MutexLock lifecycle(&lifecycle_mu_);
  if (thread_.joinable()) thread_.join();
}

absl::Status SpotNoticeWatcher::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

void SpotNoticeWatcher::RunPollingLoop() {
  polling_thread_id_.store(std::this_thread::get_id());
  do {
    absl::StatusOr<std::optional<SpotNotice>> notice = PollOnce();
    if (notice.ok() && notice->has_value()) {
      // Only this thread delivers, and it exits right after: exactly once.
      notified_.store(true);
      on_notice_(**notice);
      return;
    }
  } while (WaitBeforeNextPoll());
}

bool SpotNoticeWatcher::WaitBeforeNextPoll() {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.poll_interval);
  return !stopping_;
}

absl::StatusOr<std::optional<SpotNotice>> SpotNoticeWatcher::PollOnce() {
  absl::MutexLock lock(&poll_mu_);
  polls_.fetch_add(1);
  absl::StatusOr<std::optional<SpotNotice>> notice;
  switch (options_.source) {
    case SpotNoticeSource::kAws:
      notice = PollAws();
      break;
    case SpotNoticeSource::kGce:
      notice = PollGce();
      break;
    case SpotNoticeSource::kAzure:
      notice = PollAzure();
      break;
  }
  if (!notice.ok()) RecordError(notice.status());
  return notice;
}

absl::StatusOr<std::optional<SpotNotice>> SpotNoticeWatcher::PollAws() {
  absl::StatusOr<HttpResponse> response = GetWithToken(kInstanceActionPath);
  if (!response.ok()) return response.status();
  absl::StatusOr<std::optional<SpotNotice>> notice =
      InterpretInstanceAction(response->status, response->body);
  if (notice.ok() && !notice->has_value()) CheckRebalance();
  return notice;
}

void SpotNoticeWatcher::CheckRebalance() {
  if (!options_.on_rebalance || rebalance_reported_) return;
  absl::StatusOr<HttpResponse> response = GetWithToken(kRebalancePath);
  if (!response.ok() || response->status != 200) return;
  rebalance_reported_ = true;
  options_.on_rebalance(ParseAwsRebalance(response->body));
}

absl::StatusOr<SpotNoticeWatcher::HttpResponse> SpotNoticeWatcher::GetWithToken(
    absl::string_view path) {
  absl::StatusOr<std::string> token = CurrentToken();
  if (!token.ok()) return token.status();
  absl::StatusOr<HttpResponse> response =
      Send(HttpRequest{http::verb::get, path, kTokenHeader, *token});
  if (!response.ok() || response->status != 401) return response;
  // The service dropped our token before we expected it to (it restarted,
  // or our clock is off); a fresh token deserves exactly one retry.
  token_.clear();
  token = CurrentToken();
  if (!token.ok()) return token.status();
  return Send(HttpRequest{http::verb::get, path, kTokenHeader, *token});
}

absl::StatusOr<std::optional<SpotNotice>> SpotNoticeWatcher::PollGce() {
  absl::StatusOr<HttpResponse> response =
      Send(HttpRequest{http::verb::get, kGcePreemptedPath, kGceHeader, "Google"});
  if (!response.ok()) return response.status();
  if (response->status != 200) return UnexpectedHttpStatus("GET instance/preempted", response->status);
  return ParseGcePreempted(response->body);
}

absl::StatusOr<std::optional<SpotNotice>> SpotNoticeWatcher::PollAzure() {
  // Scheduled events list every VM of an availability set or scale set:
  // only a Preempt that names this VM is ours.
  if (azure_vm_name_.empty()) {
    absl::StatusOr<HttpResponse> name =
        Send(HttpRequest{http::verb::get, kAzureNamePath, kAzureHeader, "true"});
    if (!name.ok()) return name.status();
    if (name->status != 200) return UnexpectedHttpStatus("GET compute/name", name->status);
    const absl::string_view trimmed = absl::StripAsciiWhitespace(name->body);
    if (trimmed.empty()) return absl::UnavailableError("Azure metadata returned an empty VM name");
    azure_vm_name_ = std::string(trimmed);
  }
  absl::StatusOr<HttpResponse> events =
      Send(HttpRequest{http::verb::get, kAzureEventsPath, kAzureHeader, "true"});
  if (!events.ok()) return events.status();
  if (events->status != 200) return UnexpectedHttpStatus("GET scheduledevents", events->status);
  return ParseAzureScheduledEvents(events->body, azure_vm_name_);
}

absl::StatusOr<std::string> SpotNoticeWatcher::CurrentToken() {
  if (!token_.empty() && absl::Now() < token_refresh_at_) return token_;
  // Timed from before the request, so the token's life is never overrated.
  const absl::Time requested_at = absl::Now();
  absl::StatusOr<std::string> token = FetchToken();
  if (!token.ok()) return token.status();
  token_ = *std::move(token);
  token_refresh_at_ = requested_at + TokenUseTime(options_.token_ttl_s);
  return token_;
}

absl::StatusOr<std::string> SpotNoticeWatcher::FetchToken() {
  token_fetches_.fetch_add(1);
  absl::StatusOr<HttpResponse> response = Send(HttpRequest{
      http::verb::put, kTokenPath, kTokenTtlHeader, absl::StrCat(options_.token_ttl_s)});
  if (!response.ok()) return response.status();
  if (response->status != 200) return UnexpectedHttpStatus("PUT token", response->status);
  const absl::string_view token = absl::StripAsciiWhitespace(response->body);
  if (token.empty()) return absl::UnavailableError("metadata service returned an empty token");
  return std::string(token);
}

absl::StatusOr<SpotNoticeWatcher::HttpResponse> SpotNoticeWatcher::Send(
    const HttpRequest& request) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("spot notice watcher stopped");
    io_.restart();
  }
  HttpExchange exchange(io_, request, host_header_, options_.request_timeout);
  exchange.Start(endpoint_);
  io_.run();
  return exchange.Result();
}

void SpotNoticeWatcher::RecordError(const absl::Status& status) {
  if (absl::IsCancelled(status)) return;  // Stop() is not a failure of the service
  errors_.fetch_add(1);
  absl::MutexLock lock(&mu_);
  last_error_ = status;
}

}  // namespace spotps
