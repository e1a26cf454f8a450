// ServerReflectionV1: grpc.reflection.v1 beside gRPC's own v1alpha, so that
// tools which ask v1 first (grpcurl, Postman, grpc_cli) can list and
// describe a shard's services.
//
//   grpc::ServerBuilder builder;
//   builder.SetOption(ServerReflectionV1Option());
#ifndef SPOTPS_PS_RPC_SERVER_REFLECTION_V1_H_
#define SPOTPS_PS_RPC_SERVER_REFLECTION_V1_H_

#include <grpcpp/impl/server_builder_option.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace spotps {

// Answers reflection requests from the descriptors compiled into this
// program (protobuf's generated pool), as v1alpha does: a file by name, the
// file that defines a symbol or an extension, a type's extension numbers,
// the server's services. Each answer carries the file and every file it
// depends on. Unknown names get error_response NOT_FOUND, the stream goes on.
class ServerReflectionV1 final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // The fully qualified names of the server's services, once it is built.
  void SetServices(std::vector<std::string> services);

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<grpc::reflection::v1::ServerReflectionResponse,
                               grpc::reflection::v1::ServerReflectionRequest>* stream) override;

  // The response to one request.
  grpc::reflection::v1::ServerReflectionResponse Answer(
      const grpc::reflection::v1::ServerReflectionRequest& request) const;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> services_ ABSL_GUARDED_BY(mu_);
};

// A builder option that registers a ServerReflectionV1 with the server and
// tells it the services the server ended up with.
std::unique_ptr<grpc::ServerBuilderOption> ServerReflectionV1Option();

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_SERVER_REFLECTION_V1_H_
