// MetricsRegistry's text format (prometheus-cpp underneath) and HttpEndpoint
// against a real socket.
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/http_endpoint.h"
#include "common/metrics_registry.h"

namespace spotps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsRegistryTest, RendersCountersGaugesAndLabelsInTextFormat) {
  MetricsRegistry r;
  r.Counter("spotps_x_total", "Things.\nMore", {{"shard", "0"}})->Increment(3);
  r.Counter("spotps_x_total", "Things.", {{"shard", "0"}})->Increment(2);   // Same series.
  r.Counter("spotps_x_total", "Things.", {{"shard", "1"}})->Increment(-5);  // Never down.
  r.Gauge("spotps_g", "A gauge.", {{"name", "a\"b\\c\nd"}})->Set(0.25);
  const std::string text = r.Render();
  EXPECT_THAT(text,
              HasSubstr("# HELP spotps_x_total Things.\\nMore\n# TYPE spotps_x_total counter\n"
                        "spotps_x_total{shard=\"0\"} 5\nspotps_x_total{shard=\"1\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE spotps_g gauge\nspotps_g{name=\"a\\\"b\\\\c\\nd\"} 0.25\n"));
  EXPECT_LT(text.find("spotps_g"), text.find("spotps_x_total"));  // Sorted by name.
}

TEST(MetricsRegistryTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  MetricsRegistry r;
  MetricHistogram* h = r.Histogram("spotps_h_seconds", "H.", {0.1, 1}, {{"phase", "pull"}});
  for (double v : {0.05, 0.1, 0.5, 5.0}) h->Observe(v);
  h->Observe(std::nan(""));  // Ignored.
  const std::string text = r.Render();
  EXPECT_THAT(text, HasSubstr("spotps_h_seconds_bucket{phase=\"pull\",le=\"0.1\"} 2\n"
                              "spotps_h_seconds_bucket{phase=\"pull\",le=\"1\"} 3\n"
                              "spotps_h_seconds_bucket{phase=\"pull\",le=\"+Inf\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("\nspotps_h_seconds_sum{phase=\"pull\"} 5.65\n"));
  EXPECT_THAT(text, HasSubstr("\nspotps_h_seconds_count{phase=\"pull\"} 4\n"));
}

TEST(MetricsRegistryTest, CollectorsRunAtEachRender) {
  MetricsRegistry r;
  int calls = 0;
  r.AddCollector([&] { r.Gauge("spotps_calls", "Calls.")->Set(++calls); });
  EXPECT_THAT(r.Render(), HasSubstr("spotps_calls 1\n"));
  EXPECT_THAT(r.Render(), HasSubstr("spotps_calls 2\n"));
}

TEST(MetricsRegistryTest, ConcurrentIncrementsAreAllCounted) {
  MetricsRegistry r;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&r] {
      for (int i = 0; i < 10000; ++i) {
        r.Counter("spotps_c_total", "C.")->Increment();
        r.Histogram("spotps_h", "H.", {1})->Observe(0.5);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(r.Counter("spotps_c_total", "C.")->value(), 40000);
  EXPECT_THAT(r.Render(), HasSubstr("spotps_h_count 40000\n"));
}

TEST(MetricsRegistryDeathTest, MisuseAborts) {
  MetricsRegistry r;
  r.Counter("spotps_a_total", "A.");
  EXPECT_DEATH(r.Gauge("spotps_a_total", "A."), "two types");
  EXPECT_DEATH(r.Counter("bad name", "B."), "bad metric name");
  EXPECT_DEATH(r.Counter("spotps_b_total", "B.", {{"le", "1"}}), "bad label name");
}

// One raw HTTP/1.1 exchange; returns everything the server sent.
std::string Exchange(int port, const std::string& request) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)});
  asio::write(socket, asio::buffer(request));
  std::string reply;
  boost::system::error_code ec;
  char buf[4096];
  while (true) {
    const size_t n = socket.read_some(asio::buffer(buf), ec);
    reply.append(buf, n);
    if (ec) break;
  }
  return reply;
}

TEST(HttpEndpointTest, ServesHandlersAndRefusesEverythingElse) {
  MetricsRegistry r;
  r.Counter("spotps_hits_total", "Hits.")->Increment();
  auto endpoint = HttpEndpoint::Start(
      "127.0.0.1:0", {{"/metrics", [&r] {
                         return HttpReply{200, "text/plain; version=0.0.4", r.Render()};
                       }}});
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const int port = (*endpoint)->port();
  ASSERT_GT(port, 0);
  const std::string ok =
      Exchange(port, "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(ok, "HTTP/1.1 200")) << ok;
  EXPECT_THAT(ok, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(ok, HasSubstr("spotps_hits_total 1\n"));
  EXPECT_TRUE(
      absl::StartsWith(Exchange(port, "GET /nope HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
                       "HTTP/1.1 404"));
  const std::string post =
      Exchange(port, "POST /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(post, "HTTP/1.1 405")) << post;
  EXPECT_THAT(post, HasSubstr("Allow: GET, HEAD"));
  EXPECT_TRUE(absl::StartsWith(
      Exchange(port, "GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"),
      "HTTP/1.1 413"));
  EXPECT_TRUE(absl::StartsWith(
      Exchange(port, absl::StrCat("GET /metrics HTTP/1.1\r\nHost: a\r\nX: ", std::string(9000, 'x'),
                                  "\r\n\r\n")),
      "HTTP/1.1 431"));
  EXPECT_TRUE(absl::StartsWith(Exchange(port, "BLAH\r\n\r\n"), "HTTP/1.1 400"));
  const std::string head =
      Exchange(port, "HEAD /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(head, "HTTP/1.1 200"));
  EXPECT_THAT(head, Not(HasSubstr("spotps_hits_total")));
  // Keep-alive: two requests on one connection.
  const std::string two =
      Exchange(port,
               "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\nGET /metrics HTTP/1.1\r\nHost: a\r\n"
               "Connection: close\r\n\r\n");
  EXPECT_EQ(two.find("HTTP/1.1 200"), 0u);
  EXPECT_NE(two.find("HTTP/1.1 200", 10), std::string::npos);
}

TEST(HttpEndpointTest, StopClosesThePortAndRejectsBadAddresses) {
  auto endpoint = HttpEndpoint::Start("127.0.0.1:0", {});
  ASSERT_TRUE(endpoint.ok());
  const int port = (*endpoint)->port();
  // A connection left open and idle does not keep Stop from returning.
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket idle(io);
  idle.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)});
  endpoint->reset();
  boost::asio::ip::tcp::socket late(io);
  boost::system::error_code ec;
  late.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)}, ec);
  EXPECT_TRUE(ec) << "port " << port << " still accepts after Stop";
  EXPECT_TRUE(absl::IsInvalidArgument(HttpEndpoint::Start("nohostport", {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(HttpEndpoint::Start("127.0.0.1:70000", {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(HttpEndpoint::CheckListenAddress(":80")));
  // A port someone else holds.
  auto first = HttpEndpoint::Start("127.0.0.1:0", {});
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(absl::IsUnavailable(
      HttpEndpoint::Start(absl::StrCat("127.0.0.1:", (*first)->port()), {}).status()));
}

}  // namespace
}  // namespace spotps
