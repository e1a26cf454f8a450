#include "trainer/elastic/spot_notice_watcher.h"

#include <boost/asio/connect.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "tests/support/fake_metadata_server.h"

namespace spotps {
namespace {

using ::spotps::testing::FakeMetadataServer;

constexpr char kNoticeTime[] = "2017-09-18T08:22:00Z";

// Generous against a busy machine; the happy paths take milliseconds.
constexpr absl::Duration kEventually = absl::Seconds(5);
// What "promptly" means for Stop() and for a timed-out poll.
constexpr absl::Duration kPromptly = absl::Seconds(1);

// Polls `done` every few milliseconds; false if it stayed false for `limit`.
bool WaitUntil(const std::function<bool()>& done, absl::Duration limit = kEventually) {
  const absl::Time give_up = absl::Now() + limit;
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

// Records every notice a watcher delivers, from whichever thread.
class NoticeLog {
 public:
  SpotNoticeWatcher::NoticeCallback Callback() {
    return [this](const SpotNotice& notice) {
      absl::MutexLock lock(&mu_);
      notices_.push_back(notice);
    };
  }
  std::vector<SpotNotice> notices() const {
    absl::MutexLock lock(&mu_);
    return notices_;
  }
  size_t size() const { return notices().size(); }

 private:
  mutable absl::Mutex mu_;
  std::vector<SpotNotice> notices_;
};

class SpotNoticeWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<FakeMetadataServer>> server = FakeMetadataServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // Fast options aimed at the fake server.
  SpotNoticeWatcher::Options FastOptions() const {
    SpotNoticeWatcher::Options options;
    options.metadata_url = server_->url();
    options.poll_interval = absl::Milliseconds(50);
    options.request_timeout = absl::Milliseconds(500);
    return options;
  }

  std::unique_ptr<SpotNoticeWatcher> MakeWatcher(const SpotNoticeWatcher::Options& options) {
    absl::StatusOr<std::unique_ptr<SpotNoticeWatcher>> watcher =
        SpotNoticeWatcher::Create(options, log_.Callback());
    EXPECT_TRUE(watcher.ok()) << watcher.status();
    return watcher.ok() ? *std::move(watcher) : nullptr;
  }

  std::unique_ptr<FakeMetadataServer> server_;
  NoticeLog log_;
};

TEST_F(SpotNoticeWatcherTest, NoNoticeIsNulloptAndTheTokenIsReused) {
  std::unique_ptr<SpotNoticeWatcher> watcher = MakeWatcher(FastOptions());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::optional<SpotNotice>> notice = watcher->PollOnce();
    ASSERT_TRUE(notice.ok()) << notice.status();
    EXPECT_FALSE(notice->has_value());
  }
  EXPECT_EQ(server_->requests().token_puts, 1);
  EXPECT_EQ(server_->requests().action_gets, 3);
  EXPECT_EQ(watcher->polls(), 3);
  EXPECT_EQ(watcher->errors(), 0);
  EXPECT_EQ(log_.size(), 0u);  // PollOnce never invokes the callback
}

TEST_F(SpotNoticeWatcherTest, PollOnceReturnsAScheduledNotice) {
  std::unique_ptr<SpotNoticeWatcher> watcher = MakeWatcher(FastOptions());
  server_->ScheduleNotice("stop", kNoticeTime);
  absl::StatusOr<std::optional<SpotNotice>> notice = watcher->PollOnce();
  ASSERT_TRUE(notice.ok()) << notice.status();
  ASSERT_TRUE(notice->has_value());
  EXPECT_EQ((*notice)->action, "stop");
  EXPECT_EQ((*notice)->time, kNoticeTime);
  EXPECT_NE((*notice)->raw_body.find(kNoticeTime), std::string::npos);
}

TEST_F(SpotNoticeWatcherTest, NoticeDuringPollingIsDeliveredExactlyOnce) {
  std::unique_ptr<SpotNoticeWatcher> watcher = MakeWatcher(FastOptions());
  watcher->Start();
  ASSERT_TRUE(WaitUntil([&] { return server_->requests().action_gets >= 3; }));
  EXPECT_EQ(log_.size(), 0u);

  server_->ScheduleNotice("terminate", kNoticeTime);
  ASSERT_TRUE(WaitUntil([&] { return log_.size() >= 1; }));
  EXPECT_TRUE(watcher->notified());
  // Several poll intervals later there is still exactly one.
  absl::SleepFor(absl::Milliseconds(300));
  const std::vector<SpotNotice> notices = log_.notices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].action, "terminate");
  EXPECT_EQ(notices[0].time, kNoticeTime);
  EXPECT_EQ(watcher->errors(), 0);
}

TEST_F(SpotNoticeWatcherTest, ExpiredTokenIsReplacedTransparently) {
  std::unique_ptr<SpotNoticeWatcher> watcher = MakeWatcher(FastOptions());
  ASSERT_TRUE(watcher->PollOnce().ok());
  server_->ExpireTokens();

  absl::StatusOr<std::optional<SpotNotice>> notice = watcher->PollOnce();
  ASSERT_TRUE(notice.ok()) << notice.status();
  EXPECT_FALSE(notice->has_value());
  EXPECT_EQ(server_->requests().unauthorized, 1);
  EXPECT_EQ(server_->requests().token_puts, 2);
  EXPECT_EQ(watcher->token_fetches(), 2);
  EXPECT_EQ(watcher->errors(), 0);
}

TEST_F(SpotNoticeWatcherTest, TokenIsRefreshedBeforeItsTtlEnds) {
  SpotNoticeWatcher::Options options = FastOptions();
  options.token_ttl_s = 2;  // refreshed after 1.5 s
  std::unique_ptr<SpotNoticeWatcher> watcher = MakeWatcher(options);
  ASSERT_TRUE(watcher->PollOnce().ok());
  absl::SleepFor(absl::Milliseconds(1600));
  ASSERT_TRUE(watcher->PollOnce().ok());
  EXPECT_EQ(server_->requests().token_puts, 2);
  EXPECT_EQ(server_->requests().unauthorized, 0);
}

TEST_F(SpotNoticeWatcherTest, SlowServerTimesOutAndPollingRecovers) {
  SpotNoticeWatcher::Options options = FastOptions();
  options.request_timeout = absl::Milliseconds(200);
  std::unique_ptr<SpotNoticeWatcher> watcher = MakeWatcher(options);
  server_->SetDelay(absl::Seconds(3));

  const absl::Time start = absl::Now();
  absl::StatusOr<std::optional<SpotNotice>> notice = watcher->PollOnce();
  EXPECT_LT(absl::Now() - start, kPromptly);
  EXPECT_EQ(notice.status().code(), absl::StatusCode::kDeadlineExceeded) << notice.status();
  EXPECT_EQ(watcher->last_error().code(), absl::StatusCode::kDeadlineExceeded);

  server_->ScheduleNotice("hibernate", kNoticeTime);
  watcher->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher->errors() >= 3; }));
  EXPECT_EQ(log_.size(), 0u);
  server_->SetDelay(absl::ZeroDuration());
  ASSERT_TRUE(WaitUntil([&] { return log_.size() == 1; }));
  EXPECT_EQ(log_.notices()[0].action, "hibernate");
}

TEST_F(SpotNoticeWatcherTest, ServerErrorsAreCountedNotNotices) {
  std::unique_ptr<SpotNoticeWatcher> watcher = MakeWatcher(FastOptions());
  server_->SetFailStatus(500);
  server_->ScheduleNotice("terminate", kNoticeTime);
  absl::StatusOr<std::optional<SpotNotice>> notice = watcher->PollOnce();
  EXPECT_EQ(notice.status().code(), absl::StatusCode::kUnavailable) << notice.status();
  EXPECT_EQ(watcher->errors(), 1);

  server_->SetFailStatus(0);
  notice = watcher->PollOnce();
  ASSERT_TRUE(notice.ok()) << notice.status();
  EXPECT_TRUE(notice->has_value());
}

TEST_F(SpotNoticeWatcherTest, ServerDownCountsErrorsAndStopsPromptly) {
  SpotNoticeWatcher::Options options = FastOptions();
  server_.reset();  // its port is now closed
  std::unique_ptr<SpotNoticeWatcher> watcher = MakeWatcher(options);

  absl::StatusOr<std::optional<SpotNotice>> notice = watcher->PollOnce();
  EXPECT_EQ(notice.status().code(), absl::StatusCode::kUnavailable) << notice.status();
  watcher->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher->errors() >= 4; }));
  // The poll interval paces retries: no spinning on a dead service.
  EXPECT_LT(watcher->polls(), 100);

  const absl::Time start = absl::Now();
  watcher->Stop();
  EXPECT_LT(absl::Now() - start, kPromptly);
  EXPECT_FALSE(watcher->notified());
  EXPECT_EQ(log_.size(), 0u);
}

TEST_F(SpotNoticeWatcherTest, StopInterruptsARequestInFlight) {
  SpotNoticeWatcher::Options options = FastOptions();
  options.request_timeout = absl::Seconds(5);
  std::unique_ptr<SpotNoticeWatcher> watcher = MakeWatcher(options);
  server_->SetDelay(absl::Seconds(5));
  watcher->Start();
  ASSERT_TRUE(WaitUntil([&] { return server_->requests().token_puts >= 1; }));

  const absl::Time start = absl::Now();
  watcher->Stop();
  watcher->Stop();  // idempotent
  EXPECT_LT(absl::Now() - start, kPromptly);
  EXPECT_EQ(watcher->PollOnce().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(watcher->errors(), 0);  // being stopped is not a service failure
}

TEST_F(SpotNoticeWatcherTest, CallbackMayStopTheWatcher) {
  SpotNoticeWatcher* raw = nullptr;
  absl::StatusOr<std::unique_ptr<SpotNoticeWatcher>> watcher =
      SpotNoticeWatcher::Create(FastOptions(), [&](const SpotNotice&) { raw->Stop(); });
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  raw = watcher->get();
  server_->ScheduleNotice("terminate", kNoticeTime);
  (*watcher)->Start();
  ASSERT_TRUE(WaitUntil([&] { return (*watcher)->notified(); }));
  watcher->reset();  // joins the thread the callback ran on
}

TEST_F(SpotNoticeWatcherTest, DestructorStopsAPollingWatcher) {
  std::unique_ptr<SpotNoticeWatcher> watcher = MakeWatcher(FastOptions());
  watcher->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher->polls() >= 2; }));
  const absl::Time start = absl::Now();
  watcher.reset();
  EXPECT_LT(absl::Now() - start, kPromptly);
}

TEST(SpotNoticeWatcherOptionsTest, RejectsBadOptions) {
  const auto create = [](const SpotNoticeWatcher::Options& options) {
    return SpotNoticeWatcher::Create(options, [](const SpotNotice&) {}).status().code();
  };
  for (const char* url :
       {"https://169.254.169.254", "169.254.169.254", "http://", "http://metadata.example",
        "http://127.0.0.1:0", "http://127.0.0.1:99999", "http://127.0.0.1:80/latest",
        "http://127.0.0.1/latest", "http://[::1", "http://[::1]x", "http://127.0.0.1:"}) {
    SpotNoticeWatcher::Options options;
    options.metadata_url = url;
    EXPECT_EQ(create(options), absl::StatusCode::kInvalidArgument) << url;
  }
  SpotNoticeWatcher::Options options;
  options.token_ttl_s = 0;
  EXPECT_EQ(create(options), absl::StatusCode::kInvalidArgument);
  options.token_ttl_s = 21601;
  EXPECT_EQ(create(options), absl::StatusCode::kInvalidArgument);
  options = {};
  options.poll_interval = absl::ZeroDuration();
  EXPECT_EQ(create(options), absl::StatusCode::kInvalidArgument);
  options = {};
  options.request_timeout = absl::Milliseconds(-1);
  EXPECT_EQ(create(options), absl::StatusCode::kInvalidArgument);
}

TEST(SpotNoticeWatcherOptionsTest, AcceptsIpUrls) {
  for (const char* url : {"http://169.254.169.254", "http://127.0.0.1:8080/", "http://[::1]:80",
                          "http://[fd00:ec2::254]"}) {
    SpotNoticeWatcher::Options options;
    options.metadata_url = url;
    EXPECT_TRUE(SpotNoticeWatcher::Create(options, [](const SpotNotice&) {}).ok()) << url;
  }
}

// One watcher per cloud against the same fake, which serves all three.
class CloudSourcesTest : public SpotNoticeWatcherTest {
 protected:
  std::unique_ptr<SpotNoticeWatcher> WatcherFor(SpotNoticeSource source) {
    SpotNoticeWatcher::Options options = FastOptions();
    options.source = source;
    return MakeWatcher(options);
  }
  // A poll that must not be a notice and must not fail.
  static void ExpectNoNotice(SpotNoticeWatcher& watcher) {
    absl::StatusOr<std::optional<SpotNotice>> notice = watcher.PollOnce();
    ASSERT_TRUE(notice.ok()) << notice.status();
    EXPECT_FALSE(notice->has_value());
  }
  // A poll that must fail (and so count an error), never be a notice.
  static void ExpectError(SpotNoticeWatcher& watcher, absl::string_view words) {
    absl::StatusOr<std::optional<SpotNotice>> notice = watcher.PollOnce();
    ASSERT_FALSE(notice.ok()) << "a notice or none, where an error was due";
    EXPECT_EQ(notice.status().code(), absl::StatusCode::kUnavailable) << notice.status();
    EXPECT_NE(notice.status().message().find(words), std::string::npos) << notice.status();
  }
};

TEST_F(CloudSourcesTest, GcePreemptedTrueIsTheNoticeAndOtherBodiesNever) {
  std::unique_ptr<SpotNoticeWatcher> watcher = WatcherFor(SpotNoticeSource::kGce);
  ExpectNoNotice(*watcher);
  for (const char* bad : {"", "MAYBE", "true", "<html>proxy</html>"}) {
    SCOPED_TRACE(bad);
    server_->SetGcePreempted(bad);
    ExpectError(*watcher, "neither TRUE nor FALSE");
  }
  server_->SetGcePreempted("TRUE");
  server_->SetFailStatus(503);
  ExpectError(*watcher, "HTTP 503");
  server_->SetFailStatus(0);
  watcher->Start();
  ASSERT_TRUE(WaitUntil([&] { return log_.size() >= 1; }));
  EXPECT_EQ(log_.notices()[0].action, "preempted");
  EXPECT_GE(server_->requests().gce_gets, 7);
  EXPECT_EQ(server_->requests().token_puts, 0);  // GCE has no tokens.
  EXPECT_EQ(watcher->errors(), 5);
}

TEST_F(CloudSourcesTest, AzurePreemptForThisVmIsTheNotice) {
  std::unique_ptr<SpotNoticeWatcher> watcher = WatcherFor(SpotNoticeSource::kAzure);
  ExpectNoNotice(*watcher);
  // Other kinds of events, and another VM's preemption, are not ours.
  server_->SetAzureEvents(R"({"DocumentIncarnation": 2, "Events": [
      {"EventId": "a", "EventType": "Freeze", "Resources": ["spotps-test-vm"]},
      {"EventId": "b", "EventType": "Preempt", "Resources": ["other-vm"],
       "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT"}]})");
  ExpectNoNotice(*watcher);
  for (const char* bad : {"", "not json", "[]", R"({"Events": "Preempt"})", R"({"Event": []})"}) {
    SCOPED_TRACE(bad);
    server_->SetAzureEvents(bad);
    ExpectError(*watcher, "Events array");
  }
  server_->SetAzureEvents(R"({"DocumentIncarnation": 3, "Events": [
      {"EventId": "c", "EventType": "Preempt", "ResourceType": "VirtualMachine",
       "Resources": ["other-vm", "spotps-test-vm"], "EventStatus": "Scheduled",
       "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT"}]})");
  absl::StatusOr<std::optional<SpotNotice>> notice = watcher->PollOnce();
  ASSERT_TRUE(notice.ok()) << notice.status();
  ASSERT_TRUE(notice->has_value());
  EXPECT_EQ((*notice)->action, "Preempt");
  EXPECT_EQ((*notice)->time, "Mon, 19 Sep 2016 18:29:47 GMT");
  EXPECT_EQ(server_->requests().azure_gets, 8);
  EXPECT_EQ(server_->requests().other, 0);  // Every request carried what Azure wants.
}

TEST_F(CloudSourcesTest, AnAwsRebalanceRecommendationIsReportedOnceAndIsNoNotice) {
  NoticeLog rebalances;
  SpotNoticeWatcher::Options options = FastOptions();
  options.on_rebalance = rebalances.Callback();
  std::unique_ptr<SpotNoticeWatcher> watcher = MakeWatcher(options);
  ExpectNoNotice(*watcher);
  EXPECT_EQ(server_->requests().rebalance_gets, 1);
  server_->ScheduleRebalance(kNoticeTime);
  watcher->Start();
  ASSERT_TRUE(WaitUntil([&] { return rebalances.size() >= 1; }));
  ASSERT_TRUE(WaitUntil([&] { return watcher->polls() >= 5; }));
  EXPECT_EQ(log_.size(), 0u);  // Training goes on.
  ASSERT_EQ(rebalances.size(), 1u);
  EXPECT_EQ(rebalances.notices()[0].action, "rebalance");
  EXPECT_EQ(rebalances.notices()[0].time, kNoticeTime);
  const int64_t asked = server_->requests().rebalance_gets;
  server_->ScheduleNotice("terminate", kNoticeTime);
  ASSERT_TRUE(WaitUntil([&] { return log_.size() >= 1; }));
  EXPECT_EQ(server_->requests().rebalance_gets, asked);  // Reported once, never asked again.
  EXPECT_EQ(watcher->errors(), 0);
}

TEST(SpotNoticeSourceTest, NamesRoundTripAndUnknownOnesAreRefused) {
  for (SpotNoticeSource s : {SpotNoticeSource::kAws, SpotNoticeSource::kGce,
                             SpotNoticeSource::kAzure}) {
    EXPECT_EQ(*ParseSpotNoticeSource(SpotNoticeSourceName(s)), s);
  }
  absl::StatusOr<SpotNoticeSource> bad = ParseSpotNoticeSource("oracle");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("aws, gce or azure"), std::string::npos);
}

TEST(SpotNoticeParseTest, ExtractsFieldsTolerantly) {
  SpotNotice notice =
      ParseAwsInstanceAction("{ \"time\" :\"2017-09-18T08:22:00Z\",\n\t\"action\":\"stop\" }");
  EXPECT_EQ(notice.action, "stop");
  EXPECT_EQ(notice.time, kNoticeTime);

  notice = ParseAwsInstanceAction(R"({"note": "action", "action": "te\"rm\\inate"})");
  EXPECT_EQ(notice.action, "te\"rm\\inate");
  EXPECT_EQ(notice.time, "");

  for (const char* junk : {"", "not json", "{\"action\": 7}", "{\"action\": \"unterminated"}) {
    notice = ParseAwsInstanceAction(junk);
    EXPECT_EQ(notice.action, "") << junk;
    EXPECT_EQ(notice.raw_body, junk);
  }
}

// The fake refuses what IMDS refuses; checked with a bare HTTP client since
// the watcher never sends a token request without its TTL.
TEST(SpotNoticeFakeServerTest, RejectsTokenRequestWithoutTtl) {
  namespace http = boost::beast::http;
  absl::StatusOr<std::unique_ptr<FakeMetadataServer>> server = FakeMetadataServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.connect(
      {boost::asio::ip::address_v4::loopback(), static_cast<uint16_t>((*server)->port())});
  http::request<http::string_body> request(http::verb::put, "/latest/api/token", 11);
  request.prepare_payload();
  http::write(socket, request);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(socket, buffer, response);
  EXPECT_EQ(response.result_int(), 400u);
  EXPECT_EQ((*server)->requests().token_puts, 1);
}

}  // namespace
}  // namespace spotps
