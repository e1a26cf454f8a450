#include "ps/rpc/training_report_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace spotps {

grpc::Status TrainingReportService::Report(grpc::ServerContext*,
                                           const v1::TrainingReportRequest* request,
                                           v1::TrainingReportResponse*) {
  // The name comes from the registration, never from the report itself.
  std::string name;
  bool registered = false;
  const v1::ProgressResponse progress = coordinator_->Progress();
  for (const v1::WorkerStatus& w : progress.workers()) {
    if (w.worker_id() != request->worker_id()) continue;
    name = w.name();
    registered = true;
  }
  if (!registered) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("worker ", request->worker_id(), " is not registered"));
  }
  return ToGrpcStatus(history_->Record(*request, name, absl::Now()));
}

}  // namespace spotps
