#include "tests/support/raw_grpc_call.h"

#include <grpcpp/generic/generic_stub.h>

#include <vector>

#include "absl/strings/str_cat.h"

namespace spotps::testing {
namespace {

// Runs one operation and waits for it; false when it failed.
template <typename Op>
bool Await(grpc::CompletionQueue* cq, Op op) {
  static int tag_storage;
  op(&tag_storage);
  void* tag = nullptr;
  bool ok = false;
  cq->Next(&tag, &ok);
  return ok;
}

}  // namespace

RawReply RawGrpcCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                     const std::string& request, const std::string& bearer_token,
                     absl::Duration deadline) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  if (!bearer_token.empty()) context.AddMetadata("authorization", "Bearer " + bearer_token);
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &cq);
  RawReply reply;
  Await(&cq, [&](void* tag) { call->StartCall(tag); });
  grpc::Slice slice(request);
  grpc::ByteBuffer buffer(&slice, 1);
  Await(&cq, [&](void* tag) { call->Write(buffer, tag); });
  Await(&cq, [&](void* tag) { call->WritesDone(tag); });
  grpc::ByteBuffer received;
  if (Await(&cq, [&](void* tag) { call->Read(&received, tag); })) {
    reply.got_message = true;
    std::vector<grpc::Slice> slices;
    if (received.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        reply.first_message.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
  }
  Await(&cq, [&](void* tag) { call->Finish(&reply.status, tag); });
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
  return reply;
}

std::string HealthStatus(const std::shared_ptr<grpc::Channel>& channel) {
  // HealthCheckRequest{service: ""} is the empty message; the reply is
  // HealthCheckResponse{status = 1: SERVING, 2: NOT_SERVING} (field 1, varint).
  RawReply reply = RawGrpcCall(channel, "/grpc.health.v1.Health/Check", "", "", absl::Seconds(5));
  if (!reply.status.ok()) {
    return absl::StrCat("error ", reply.status.error_code(), ": ", reply.status.error_message());
  }
  if (reply.first_message == std::string("\x08\x01", 2)) return "SERVING";
  if (reply.first_message == std::string("\x08\x02", 2)) return "NOT_SERVING";
  return "unexpected reply";
}

}  // namespace spotps::testing
