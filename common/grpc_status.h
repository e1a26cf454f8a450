// Conversions between gRPC's and Abseil's status types. The two share their
// numeric codes, so the conversion keeps the code and the message.
#ifndef SPOTPS_COMMON_GRPC_STATUS_H_
#define SPOTPS_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace spotps {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace spotps

#endif  // SPOTPS_COMMON_GRPC_STATUS_H_
