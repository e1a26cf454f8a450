// TrainingHistory's validation, TrainingReportService over real gRPC, the
// status page's JSON and ShardMetrics' series.
#include "ps/rpc/status_page.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "ps/rpc/shard_metrics.h"
#include "ps/rpc/training_report_service.h"

namespace spotps {
namespace {

using ::testing::HasSubstr;

v1::TrainingReportRequest Report(uint64_t worker, uint64_t steps, double loss) {
  v1::TrainingReportRequest r;
  r.set_worker_id(worker);
  r.set_steps(steps);
  r.set_tokens(steps * 100);
  r.set_train_loss(loss);
  r.set_tokens_per_s(1000);
  return r;
}

TEST(TrainingHistoryTest, RefusesBadReportsWithoutChangingAnything) {
  TrainingHistory h(/*capacity=*/3);
  ASSERT_TRUE(h.Record(Report(1, 10, 2.5), "trainer-0", absl::Now()).ok());
  const double bad[] = {std::nan(""), std::numeric_limits<double>::infinity(), -1, 1e9};
  for (double loss : bad) {
    EXPECT_TRUE(absl::IsInvalidArgument(h.Record(Report(1, 11, loss), "t", absl::Now()))) << loss;
  }
  v1::TrainingReportRequest r = Report(1, 11, 2);
  r.set_tokens_per_s(std::nan(""));
  EXPECT_TRUE(absl::IsInvalidArgument(h.Record(r, "t", absl::Now())));
  r = Report(1, 11, 2);
  r.set_val_step(12);  // Beyond its steps.
  r.set_val_loss(2);
  EXPECT_TRUE(absl::IsInvalidArgument(h.Record(r, "t", absl::Now())));
  EXPECT_TRUE(absl::IsInvalidArgument(h.Record(Report(1, 9, 2), "t", absl::Now())))
      << "steps went backwards";
  EXPECT_EQ(h.accepted(), 1u);
  EXPECT_EQ(h.Points().size(), 1u);
  EXPECT_EQ(h.Latest().at(1).steps, 10u);
}

TEST(TrainingHistoryTest, KeepsTheNewestPointsAndMarksNewValidationLosses) {
  TrainingHistory h(/*capacity=*/3);
  for (uint64_t s = 1; s <= 5; ++s) {
    v1::TrainingReportRequest r = Report(7, s * 10, 3.0 - 0.1 * s);
    r.set_val_step(s >= 3 ? 30 : 0);  // One evaluation, at step 30.
    r.set_val_loss(2.75);
    ASSERT_TRUE(h.Record(r, "w", absl::Now()).ok());
  }
  const std::vector<TrainingPoint> points = h.Points();
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].steps, 30u);
  EXPECT_TRUE(points[0].has_val);
  EXPECT_FALSE(points[1].has_val);  // Same evaluation again: not a new point.
  EXPECT_EQ(points[2].steps, 50u);
}

class StatusPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ShardOptions o;
    o.num_shards = 1;
    store_ = *ShardStore::Create(o);
    CoordinatorOptions c;
    c.dispatch.num_epochs = 2;
    c.dispatch.units_per_epoch = 10;
    coordinator_ = *Coordinator::Create(c);
    service_ = std::make_unique<TrainingReportService>(coordinator_.get(), &history_, &keys_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    stub_ = v1::TrainingReports::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                             grpc::InsecureChannelCredentials()));
  }
  grpc::Status Send(const v1::TrainingReportRequest& r) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::TrainingReportResponse response;
    return stub_->Report(&context, r, &response);
  }

  std::unique_ptr<ShardStore> store_;
  std::unique_ptr<Coordinator> coordinator_;
  TrainingHistory history_;
  WorkerKeys keys_;
  std::unique_ptr<TrainingReportService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::TrainingReports::Stub> stub_;
};

TEST_F(StatusPageTest, ReportsOfRegisteredWorkersReachThePage) {
  const uint64_t id = *coordinator_->Register("trainer-\"x\"");
  const std::string key = keys_.Issue(id, "");  // As the Coordinator service's Register does.
  auto keyed = [&key](v1::TrainingReportRequest r) {
    r.set_worker_key(key);
    return r;
  };
  EXPECT_EQ(Send(keyed(Report(id + 100, 1, 2))).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Send(Report(id, 1, 2)).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Send(keyed(Report(id, 1, std::nan("")))).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(history_.accepted(), 0u);
  // A report claims at most the units granted (+2): 5 steps need 3.
  EXPECT_EQ(Send(keyed(Report(id, 5, 2.5))).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(coordinator_->Acquire(id).ok());
  v1::TrainingReportRequest r = keyed(Report(id, 5, 2.5));
  r.set_val_step(5);
  r.set_val_loss(2.625);
  ASSERT_TRUE(Send(r).ok());
  StatusPage page(store_.get(), nullptr, coordinator_.get(), &history_, nullptr);
  const nlohmann::json json = nlohmann::json::parse(page.Json());
  const nlohmann::json& worker = json["coordinator"]["workers"][0];
  EXPECT_EQ(worker["name"], "trainer-\"x\"");
  EXPECT_EQ(worker["state"], "live");
  EXPECT_EQ(worker["train_loss"], 2.5);
  EXPECT_EQ(worker["val_loss"], 2.625);
  // The history row: [time_ms, worker, steps, tokens, loss, tokens/s, val_loss].
  const nlohmann::json& row = json["history"][0];
  EXPECT_EQ(row[1], id);
  EXPECT_EQ(nlohmann::json(std::vector<nlohmann::json>(row.begin() + 2, row.end())),
            nlohmann::json::parse("[5,500,2.5,1000,2.625]"));
  EXPECT_EQ(json["coordinator"]["epochs"][0]["epoch"], 0);
  EXPECT_EQ(json["coordinator"]["epochs"][0]["units"], 10);
  EXPECT_TRUE(json["shards"]["checkpoint"].is_null());
  EXPECT_TRUE(json["shards"]["list"][0]["averaging"].is_null());  // Not averaging.
  // Gone from the coordinator: still on the page, as gone.
  ASSERT_TRUE(coordinator_->Deregister(id).ok());
  EXPECT_EQ(nlohmann::json::parse(page.Json())["coordinator"]["workers"][0]["state"], "gone");
  EXPECT_THAT(StatusPage::Html(), HasSubstr("id=\"loss-chart\""));
  EXPECT_THAT(StatusPage::Html(), ::testing::Not(HasSubstr("http://cdn")));
}

// An averaging shard shows the pushes its updates wait for and how many it
// applied short of them.
TEST(StatusPageAveragingTest, ShowsTheAveragedUpdatesTarget) {
  ShardOptions o;
  o.num_shards = 1;
  o.staleness.average = o.staleness.fresh = true;
  std::unique_ptr<ShardStore> store = *ShardStore::Create(o);
  store->SetLiveWorkers(3);
  StatusPage page(store.get(), nullptr, nullptr, nullptr, nullptr);
  const nlohmann::json averaging =
      nlohmann::json::parse(page.Json())["shards"]["list"][0]["averaging"];
  EXPECT_EQ(averaging, nlohmann::json::parse(R"({"target": 3, "waited_out": 0})"));
}

TEST_F(StatusPageTest, ShardMetricsMirrorTheStoreAndCoordinator) {
  MetricsRegistry registry;
  ShardMetrics metrics(&registry, store_.get(), nullptr, coordinator_.get(), &history_);
  ASSERT_TRUE(coordinator_->Register("t").ok());
  metrics.ObservePush(absl::Milliseconds(3), absl::Milliseconds(1), grpc::Status::OK);
  metrics.ObservePush(absl::Milliseconds(3), absl::ZeroDuration(),
                      grpc::Status(grpc::StatusCode::ABORTED, "too stale"));
  metrics.ObserveStaleness(2);
  const std::string text = registry.Render();
  EXPECT_THAT(text,
              HasSubstr("spotps_shard_pushes_refused_total{reason=\"too_stale\",shard=\"0\"} 1"));
  EXPECT_THAT(text, HasSubstr("spotps_shard_push_seconds_count{shard=\"0\"} 2"));
  EXPECT_THAT(text, HasSubstr("spotps_shard_apply_seconds_count{shard=\"0\"} 1"));
  EXPECT_THAT(text, HasSubstr("spotps_shard_push_staleness_bucket{shard=\"0\",le=\"2\"} 1"));
  EXPECT_THAT(text, HasSubstr("spotps_shard_pushes_applied_total{shard=\"0\"} 0"));
  EXPECT_THAT(text, HasSubstr("spotps_coordinator_workers_live 1"));
  EXPECT_THAT(text, HasSubstr("spotps_coordinator_units{epoch=\"0\"} 10"));
}

}  // namespace
}  // namespace spotps
