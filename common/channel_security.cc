#include "common/channel_security.h"

#include <grpcpp/support/client_interceptor.h>

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"

namespace spotps {
namespace {

// Adds the bearer token to the initial metadata of one call.
class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header) : header_(header) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;  // Owned by the factory, which the channel keeps.
};

class BearerTokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(const std::string& token)
      : header_(absl::StrCat("Bearer ", token)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new BearerTokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

absl::StatusOr<std::string> ReadIfNamed(const std::string& path) {
  if (path.empty()) return std::string();
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  if (text->empty()) return absl::InvalidArgumentError(absl::StrCat(path, " is empty"));
  return text;
}

}  // namespace

bool IsWellFormedToken(const std::string& token) {
  if (token.size() < 16 || token.size() > 256) return false;
  for (char c : token) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::string token(line);
    if (!IsWellFormedToken(token)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token file ", path, ": a token is 16 to 256 printable characters without spaces"));
    }
    return token;
  }
  return absl::InvalidArgumentError(absl::StrCat("token file ", path, " holds no token"));
}

absl::StatusOr<ChannelSecurity> LoadChannelSecurity(const std::string& ca_file,
                                                    const std::string& cert_file,
                                                    const std::string& key_file,
                                                    const std::string& token_file) {
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  if (!cert_file.empty() && ca_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate (--tls_cert) needs --tls_ca: it is only sent over TLS");
  }
  ChannelSecurity security;
  for (auto [path, pem] :
       {std::pair{&ca_file, &security.ca_pem}, std::pair{&cert_file, &security.cert_pem},
        std::pair{&key_file, &security.key_pem}}) {
    absl::StatusOr<std::string> text = ReadIfNamed(*path);
    if (!text.ok()) return text.status();
    *pem = *std::move(text);
  }
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(token_file);
    if (!token.ok()) return token.status();
    security.bearer_token = *std::move(token);
  }
  return security;
}

std::shared_ptr<grpc::Channel> CreateSecureChannel(const std::string& address,
                                                   const ChannelSecurity& security,
                                                   const grpc::ChannelArguments& args) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!security.ca_pem.empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = security.ca_pem;
    tls.pem_private_key = security.key_pem;
    tls.pem_cert_chain = security.cert_pem;
    credentials = grpc::SslCredentials(tls);
  }
  if (security.bearer_token.empty()) return grpc::CreateCustomChannel(address, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<BearerTokenInterceptorFactory>(security.bearer_token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, credentials, args,
                                                                 std::move(factories));
}

}  // namespace spotps
