#include "ps/rpc/shard_security.h"

#include <arpa/inet.h>
#include <grpc/grpc_security.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <netinet/in.h>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"
#include "common/security_flags.h"

ABSL_FLAG(std::string, auth_tokens, "",
          "File of 'TOKEN ROLE' lines (roles: reader, trainer, admin); every call must then "
          "carry a token whose role allows it.");
ABSL_FLAG(bool, insecure, false,
          "Allow plaintext on a non-loopback --listen or --metrics_listen address (without "
          "--tls_cert).");

namespace spotps {
namespace {

constexpr absl::string_view kBearerPrefix = "Bearer ";
// The auth-context property the gate records the admitted token under.
constexpr char kTokenIdentityProperty[] = "spotps_token";

absl::string_view SliceView(const grpc_slice& slice) {
  return absl::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)),
                           GRPC_SLICE_LENGTH(slice));
}

bool HasProperty(const grpc_auth_context* context, absl::string_view value) {
  grpc_auth_property_iterator it =
      grpc_auth_context_find_properties_by_name(context, kTokenIdentityProperty);
  for (const grpc_auth_property* p = grpc_auth_property_iterator_next(&it); p != nullptr;
       p = grpc_auth_property_iterator_next(&it)) {
    if (absl::string_view(p->value, p->value_length) == value) return true;
  }
  return false;
}

// gRPC's C hook: runs on the call's path before any handler, for plaintext
// and TLS alike. Consumes the authorization header so handlers never see it.
void ProcessCallMetadata(void* state, grpc_auth_context* context, const grpc_metadata* md,
                         size_t num_md, grpc_process_auth_metadata_done_cb done, void* user_data) {
  const auto* gate = static_cast<const ShardAccessGate*>(state);
  absl::string_view method;
  std::vector<absl::string_view> authorization;
  std::vector<grpc_metadata> consumed;
  for (size_t i = 0; i < num_md; ++i) {
    const absl::string_view key = SliceView(md[i].key);
    if (key == ":path") method = SliceView(md[i].value);
    if (key == "authorization") {
      authorization.push_back(SliceView(md[i].value));
      consumed.push_back(md[i]);
    }
  }
  const ShardAccessGate::Decision decision = gate->Admit(method, authorization);
  // The context is the connection's: each token it carried is recorded once.
  if (decision.code == GRPC_STATUS_OK && !decision.identity.empty() && context != nullptr &&
      !HasProperty(context, decision.identity)) {
    grpc_auth_context_add_cstring_property(context, kTokenIdentityProperty,
                                           decision.identity.c_str());
  }
  done(user_data, consumed.data(), consumed.size(), nullptr, 0, decision.code,
       decision.message.c_str());
}

// ServerCredentials over any C-core credentials, with the gate as their
// metadata processor. gRPC++ offers a processor only on TLS credentials;
// the core runs it for plaintext too, which loopback setups with tokens
// need.
class GatedCredentials final : public grpc::ServerCredentials {
 public:
  GatedCredentials(grpc_server_credentials* core, ShardAccessGate* gate) : core_(core) {
    grpc_server_credentials_set_auth_metadata_processor(
        core_, grpc_auth_metadata_processor{&ProcessCallMetadata, nullptr, gate});
  }
  ~GatedCredentials() override { grpc_server_credentials_release(core_); }

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/) override {
    // The gate is the processor; nothing else may replace it.
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), core_);
  }

  grpc_server_credentials* const core_;
};

absl::StatusOr<std::string> ReadPem(const std::string& path) {
  if (path.empty()) return std::string();
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  if (!absl::StrContains(*text, "-----BEGIN")) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a PEM file"));
  }
  return text;
}

}  // namespace

bool IsLoopbackListenAddress(absl::string_view listen) {
  const size_t colon = listen.rfind(':');
  absl::string_view host = colon == absl::string_view::npos ? listen : listen.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  if (host == "localhost") return true;
  // Only literal addresses: a name such as 127.0.0.1.example.com may
  // resolve anywhere.
  const std::string literal(host);
  in_addr v4;
  if (inet_pton(AF_INET, literal.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;  // 127.0.0.0/8
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, literal.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  // ::ffff:127.x.y.z, an IPv4 loopback address written as IPv6.
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

namespace {
// The one rule for every listener, gRPC's and the metrics': plaintext
// beyond loopback only with --insecure.
bool RefusesPlaintext(bool tls, const std::string& listen) {
  return !tls && !absl::GetFlag(FLAGS_insecure) && !IsLoopbackListenAddress(listen);
}
}  // namespace

absl::StatusOr<ShardSecurityOptions> ShardSecurityFromFlags(const std::string& listen) {
  const TlsFileFlags files = TlsFilesFromFlags();
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  if (!files.ca_file.empty() && files.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_ca (require client certificates) needs the shard's own --tls_cert and --tls_key");
  }
  if (RefusesPlaintext(!files.cert_file.empty(), listen)) {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing plaintext on the non-loopback address ", listen,
                     ": give --tls_cert and --tls_key (and --tls_ca for mTLS), or --insecure"));
  }
  ShardSecurityOptions options;
  for (auto [path, pem] :
       {std::pair{&files.cert_file, &options.cert_pem},
        std::pair{&files.key_file, &options.key_pem}, std::pair{&files.ca_file, &options.ca_pem}}) {
    absl::StatusOr<std::string> text = ReadPem(*path);
    if (!text.ok()) return text.status();
    *pem = *std::move(text);
  }
  if (const std::string path = absl::GetFlag(FLAGS_auth_tokens); !path.empty()) {
    absl::StatusOr<TokenTable> tokens = TokenTable::Load(path);
    if (!tokens.ok()) return tokens.status();
    options.tokens = *std::move(tokens);
  }
  return options;
}

absl::StatusOr<HttpEndpointOptions> MetricsEndpointSecurity(const std::string& metrics_listen,
                                                            const ShardSecurityOptions& shard) {
  if (RefusesPlaintext(!shard.cert_pem.empty(), metrics_listen)) {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing plaintext metrics on the non-loopback address ", metrics_listen,
                     " (--metrics_listen): give --tls_cert and --tls_key, or --insecure"));
  }
  HttpEndpointOptions options;
  options.cert_pem = shard.cert_pem;
  options.key_pem = shard.key_pem;
  if (shard.tokens.has_value()) {
    options.authorize = [tokens = *shard.tokens](absl::string_view token) {
      const std::optional<Role> role = tokens.RoleOf(token);
      if (!role.has_value()) return HttpAccess::kUnauthenticated;
      return *role >= Role::kReader ? HttpAccess::kAllowed : HttpAccess::kForbidden;
    };
  }
  return options;
}

absl::StatusOr<ChannelSecurity> PeerSecurityFromFlags() {
  const TlsFileFlags files = TlsFilesFromFlags();
  if (!files.cert_file.empty() && files.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "shard 0 serving TLS needs --tls_ca to verify its peers' certificates");
  }
  return ChannelSecurityFromFlags();
}

ShardAccessGate::ShardAccessGate(std::optional<TokenTable> tokens) : tokens_(std::move(tokens)) {}

ShardAccessGate::Decision ShardAccessGate::Admit(
    absl::string_view method, const std::vector<absl::string_view>& authorization) const {
  const std::optional<Role> required = RequiredRole(method);
  if (!required.has_value()) {
    return {GRPC_STATUS_PERMISSION_DENIED,
            absl::StrCat("access: ", method, " is not in the shard's access table")};
  }
  if (*required == Role::kPublic) {
    if (absl::StartsWith(method, "/grpc.health.v1.Health/") &&
        !health_attached_.load(std::memory_order_acquire)) {
      return {GRPC_STATUS_UNAVAILABLE, "access: shard is starting (no health status yet)"};
    }
    return {};
  }
  if (!serving_.load(std::memory_order_acquire)) {
    absl::MutexLock lock(&mu_);
    return {GRPC_STATUS_UNAVAILABLE, absl::StrCat("access: shard is ", not_serving_reason_)};
  }
  if (!tokens_.has_value()) return {};
  absl::string_view token;
  if (authorization.size() != 1 || !absl::StartsWith(authorization[0], kBearerPrefix)) {
    return {GRPC_STATUS_UNAUTHENTICATED,
            absl::StrCat("access: ", method, " needs one 'authorization: Bearer TOKEN' header")};
  }
  token = authorization[0].substr(kBearerPrefix.size());
  const std::optional<size_t> index = tokens_->IndexOf(token);
  const std::optional<Role> role = tokens_->RoleOf(token);
  if (!role.has_value() || !index.has_value()) {
    return {GRPC_STATUS_UNAUTHENTICATED, "access: unknown bearer token"};
  }
  if (*role < *required) {
    return {GRPC_STATUS_PERMISSION_DENIED,
            absl::StrCat("access: role ", RoleName(*role), " may not call ", method, " (needs ",
                         RoleName(*required), ")")};
  }
  return {GRPC_STATUS_OK, "", absl::StrCat("token ", *index + 1, " (", RoleName(*role), ")")};
}

std::string CallerIdentity(const grpc::ServerContext& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return "";
  std::vector<std::string> parts;
  for (const grpc::string_ref& v : auth->FindPropertyValues(kTokenIdentityProperty)) {
    parts.emplace_back(v.data(), v.size());
  }
  for (const grpc::string_ref& v : auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
    parts.push_back(absl::StrCat("certificate ", absl::string_view(v.data(), v.size())));
  }
  return absl::StrJoin(parts, ", ");
}

void ShardAccessGate::SetServing(bool serving, absl::string_view why) {
  absl::MutexLock lock(&mu_);
  if (!serving) not_serving_reason_ = std::string(why);
  serving_.store(serving, std::memory_order_release);
  if (server_ != nullptr && server_->GetHealthCheckService() != nullptr) {
    server_->GetHealthCheckService()->SetServingStatus(serving);
  }
}

void ShardAccessGate::AttachServer(grpc::Server* server) {
  absl::MutexLock lock(&mu_);
  server_ = server;
  if (server_->GetHealthCheckService() != nullptr) {
    server_->GetHealthCheckService()->SetServingStatus(serving_.load());
  }
  health_attached_.store(true, std::memory_order_release);
}

std::shared_ptr<grpc::ServerCredentials> GatedServerCredentials(const ShardSecurityOptions& options,
                                                                ShardAccessGate* gate) {
  grpc_server_credentials* core = nullptr;
  if (options.cert_pem.empty()) {
    core = grpc_insecure_server_credentials_create();
  } else {
    grpc_ssl_pem_key_cert_pair pair{options.key_pem.c_str(), options.cert_pem.c_str()};
    core = grpc_ssl_server_credentials_create_ex(
        options.ca_pem.empty() ? nullptr : options.ca_pem.c_str(), &pair, 1,
        options.ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                               : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY,
        nullptr);
  }
  return std::make_shared<GatedCredentials>(core, gate);
}

void EnableHealthAndReflection() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
}

}  // namespace spotps
