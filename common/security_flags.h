// The flags every spotps binary shares for TLS and tokens: --tls_ca,
// --tls_cert, --tls_key and --token_file. A client reads them as "how I
// reach the servers"; spotps-ps reads the TLS ones as its server identity
// (ps/rpc/shard_security.h) and the token as the one it shows its peers.
#ifndef SPOTPS_COMMON_SECURITY_FLAGS_H_
#define SPOTPS_COMMON_SECURITY_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/channel_security.h"

namespace spotps {

struct TlsFileFlags {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

TlsFileFlags TlsFilesFromFlags();
std::string TokenFileFromFlag();

// LoadChannelSecurity over the four flags.
absl::StatusOr<ChannelSecurity> ChannelSecurityFromFlags();

}  // namespace spotps

#endif  // SPOTPS_COMMON_SECURITY_FLAGS_H_
