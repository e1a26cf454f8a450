#include "ps/rpc/training_report_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "ps/rpc/coordinator_service.h"

namespace spotps {

grpc::Status TrainingReportService::Report(grpc::ServerContext* context,
                                           const v1::TrainingReportRequest* request,
                                           v1::TrainingReportResponse*) {
  if (grpc::Status k = CheckWorkerKey(*keys_, *context, request->worker_id(), request->worker_key());
      !k.ok()) {
    return k;
  }
  // The name comes from the registration, never from the report itself.
  const v1::ProgressResponse progress = coordinator_->Progress();
  for (const v1::WorkerStatus& w : progress.workers()) {
    if (w.worker_id() != request->worker_id()) continue;
    // A worker counts its steps and tokens from its registration: it cannot
    // have trained more units than it was granted since (+2: a join ramp
    // trains its first unit in two steps, and a step may straddle a
    // re-registration), nor more tokens than those units hold.
    ReportBounds bounds;
    bounds.max_steps = w.units_granted() + 2;
    bounds.max_tokens =
        bounds.max_steps * (w.tokens_per_unit() > 0 ? w.tokens_per_unit() : kMaxTokensPerUnit);
    return ToGrpcStatus(history_->Record(*request, w.name(), absl::Now(), bounds));
  }
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      absl::StrCat("worker ", request->worker_id(), " is not registered"));
}

}  // namespace spotps
