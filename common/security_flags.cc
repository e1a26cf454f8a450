#include "common/security_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate. Client: use TLS and trust servers it signed. spotps-ps: require "
          "client certificates it signed (mTLS).");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: spotps-ps serves TLS with it; a client presents it (mTLS).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, token_file, "",
          "File holding the bearer token sent on every call (spotps-ps: to its peers).");

namespace spotps {

TlsFileFlags TlsFilesFromFlags() {
  return TlsFileFlags{absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_tls_cert),
                      absl::GetFlag(FLAGS_tls_key)};
}

std::string TokenFileFromFlag() { return absl::GetFlag(FLAGS_token_file); }

absl::StatusOr<ChannelSecurity> ChannelSecurityFromFlags() {
  const TlsFileFlags tls = TlsFilesFromFlags();
  return LoadChannelSecurity(tls.ca_file, tls.cert_file, tls.key_file, TokenFileFromFlag());
}

}  // namespace spotps
