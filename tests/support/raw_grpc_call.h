// RawGrpcCall: one call to any method by its full name, with raw request
// bytes, over any channel -- for tests that walk every method of a server
// (the role matrix) or speak to services without generated stubs here
// (grpc.health.v1, grpc.reflection.v1alpha).
#ifndef SPOTPS_TESTS_SUPPORT_RAW_GRPC_CALL_H_
#define SPOTPS_TESTS_SUPPORT_RAW_GRPC_CALL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/time/time.h"

namespace spotps::testing {

struct RawReply {
  grpc::Status status;
  bool got_message = false;
  std::string first_message;  // Serialized bytes of the first reply.
};

// Starts `method` ("/pkg.Service/Method") as a stream whatever its kind,
// sends `request` once and half-closes, reads one reply and finishes within
// `deadline`. `bearer_token`, if set, goes in the authorization header.
RawReply RawGrpcCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                     const std::string& request, const std::string& bearer_token,
                     absl::Duration deadline);

// grpc.health.v1.Health/Check of the whole server: "SERVING", "NOT_SERVING",
// or the call's error.
std::string HealthStatus(const std::shared_ptr<grpc::Channel>& channel);

}  // namespace spotps::testing

#endif  // SPOTPS_TESTS_SUPPORT_RAW_GRPC_CALL_H_
