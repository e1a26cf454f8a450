// What stands in front of a shard's services: transport security (plaintext,
// TLS or mTLS), the bearer-token check against the access table, and the
// serving state that the grpc.health.v1 service reports.
//
// Every call passes ShardAccessGate::Admit before its handler runs, whatever
// the transport: the gate is installed as the auth-metadata processor of the
// server's credentials, which gRPC consults for plaintext connections too.
#ifndef SPOTPS_PS_RPC_SHARD_SECURITY_H_
#define SPOTPS_PS_RPC_SHARD_SECURITY_H_

#include <grpc/status.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/channel_security.h"
#include "common/http_endpoint.h"
#include "ps/rpc/token_table.h"

namespace spotps {

struct ShardSecurityOptions {
  // TLS iff cert_pem is set; with ca_pem too, clients must present a
  // certificate that CA signed (mTLS).
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
  // Without a table every caller may call everything (loopback setups).
  std::optional<TokenTable> tokens;
};

// From --tls_cert, --tls_key, --tls_ca, --auth_tokens and --insecure.
// INVALID_ARGUMENT for half a key pair, a CA without a certificate, a bad
// token file, or a non-loopback `listen` address without TLS unless
// --insecure.
absl::StatusOr<ShardSecurityOptions> ShardSecurityFromFlags(const std::string& listen);

// The --metrics_listen endpoint behind the same doors as gRPC: HTTPS with
// the shard's certificate when it has one, and with a token table a
// reader's token (or a stronger role's) on every request. INVALID_ARGUMENT
// for plaintext on a non-loopback `metrics_listen` without --insecure.
absl::StatusOr<HttpEndpointOptions> MetricsEndpointSecurity(const std::string& metrics_listen,
                                                            const ShardSecurityOptions& shard);

// How shard 0 reaches its peers: the same CA and certificate (as a client
// certificate) and the token of --token_file.
absl::StatusOr<ChannelSecurity> PeerSecurityFromFlags();

// True for 127.x.x.x, [::1], ::1 and localhost listen addresses.
bool IsLoopbackListenAddress(absl::string_view listen);

// Who is calling, as far as the shard can tell: the bearer tokens the gate
// admitted on the call's connection ("token 2 (trainer)"; one, with the
// client library, which sends one token per channel) and the client
// certificate's subject, joined; "" for an unauthenticated plaintext caller.
std::string CallerIdentity(const grpc::ServerContext& context);

// Decides every call; owns the serving state. Thread-safe. Must outlive the
// server whose credentials name it.
class ShardAccessGate {
 public:
  struct Decision {
    Decision() = default;
    Decision(grpc_status_code code, std::string message, std::string identity = "")
        : code(code), message(std::move(message)), identity(std::move(identity)) {}

    grpc_status_code code = GRPC_STATUS_OK;
    std::string message;  // Refusals start with "access: ".
    // Admitted with a token: which ("token 2 (trainer)"), for CallerIdentity.
    std::string identity;
  };

  explicit ShardAccessGate(std::optional<TokenTable> tokens);

  // `authorization`: every value of the call's authorization header.
  // Health calls pass once a server is attached (before that, gRPC's own
  // health service would answer SERVING for a shard that is not: they get
  // UNAVAILABLE, which a probe counts as not ready). Then: UNAVAILABLE
  // while not serving; PERMISSION_DENIED for a method the access table lacks;
  // with a token table, UNAUTHENTICATED for a missing, malformed or unknown
  // token and PERMISSION_DENIED for a role below the method's.
  Decision Admit(absl::string_view method,
                 const std::vector<absl::string_view>& authorization) const;

  // Starts in the not-serving state; `why` is what refused callers read.
  // Also sets the health status of `server` once attached.
  void SetServing(bool serving, absl::string_view why = "");
  // Sets `server`'s health status to the serving state, then lets health
  // calls through.
  void AttachServer(grpc::Server* server);

 private:
  const std::optional<TokenTable> tokens_;
  std::atomic<bool> serving_{false};
  std::atomic<bool> health_attached_{false};
  mutable absl::Mutex mu_;
  std::string not_serving_reason_ ABSL_GUARDED_BY(mu_) = "starting";
  grpc::Server* server_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// Credentials for ServerBuilder::AddListeningPort that run `gate` on every
// call. `gate` must outlive the server.
std::shared_ptr<grpc::ServerCredentials> GatedServerCredentials(const ShardSecurityOptions& options,
                                                                ShardAccessGate* gate);

// Makes every server built afterwards serve grpc.health.v1.Health and
// grpc.reflection.v1alpha.ServerReflection. Call before the ServerBuilder.
void EnableHealthAndReflection();

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_SHARD_SECURITY_H_
