// The gRPC face of the TrainingHistory (hosted by shard 0 beside the
// Coordinator): trainers report their losses and throughput.
#ifndef SPOTPS_PS_RPC_TRAINING_REPORT_SERVICE_H_
#define SPOTPS_PS_RPC_TRAINING_REPORT_SERVICE_H_

#include "ps/coordination/coordinator.h"
#include "ps/coordination/training_history.h"
#include "ps/rpc/worker_keys.h"
#include "spotps/v1/training_report.grpc.pb.h"

namespace spotps {

// Serves spotps.v1.TrainingReports. Promises: only a registered worker's
// report is kept (NOT_FOUND otherwise), under the name it registered with;
// a bad report gets INVALID_ARGUMENT and changes nothing.
class TrainingReportService final : public v1::TrainingReports::Service {
 public:
  // Borrows `keys`, the Coordinator service's: a report proves its worker
  // as that service's calls do.
  TrainingReportService(Coordinator* coordinator, TrainingHistory* history, const WorkerKeys* keys)
      : coordinator_(coordinator), history_(history), keys_(keys) {}

  grpc::Status Report(grpc::ServerContext*, const v1::TrainingReportRequest* request,
                      v1::TrainingReportResponse* response) override;

 private:
  Coordinator* const coordinator_;
  TrainingHistory* const history_;
  const WorkerKeys* const keys_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_TRAINING_REPORT_SERVICE_H_
