// GrpcPresenceStream: a presence stream (client/presence_stream.h) over
// any gRPC method that answers with a stream, for the client's own use.
#ifndef SPOTPS_CLIENT_GRPC_PRESENCE_STREAM_H_
#define SPOTPS_CLIENT_GRPC_PRESENCE_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/presence_stream.h"
#include "common/grpc_status.h"

namespace spotps {

// A presence stream over a gRPC method that answers with a stream of
// `Response`. Servers end a stream after 5 minutes (ps/rpc/
// presence_streams.h); the call's deadline is a little past that.
template <typename Response>
class GrpcPresenceStream final : public PresenceStream {
 public:
  using Start = std::function<std::unique_ptr<grpc::ClientReader<Response>>(grpc::ClientContext*)>;
  // `what` names the call in errors ("shard 1 (host:port) Attend").
  GrpcPresenceStream(const Start& start, std::string what) : what_(std::move(what)) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + absl::Minutes(6)));
    reader_ = start(&context_);
  }
  absl::Status Wait() override {
    Response response;
    while (reader_->Read(&response)) {
    }
    const absl::Status s = FromGrpcStatus(reader_->Finish());
    if (s.ok()) return s;
    return absl::Status(s.code(), absl::StrCat(what_, ": ", s.message()));
  }
  void Cancel() override { context_.TryCancel(); }

 private:
  const std::string what_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<Response>> reader_;
};

}  // namespace spotps

#endif  // SPOTPS_CLIENT_GRPC_PRESENCE_STREAM_H_
