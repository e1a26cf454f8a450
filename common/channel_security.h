// ChannelSecurity: how a spotps client reaches the servers -- plaintext,
// TLS, or mutual TLS -- and the bearer token it presents. Every channel the
// client library, trainers, spotps-ctl and shard 0's peer calls open is made
// by CreateSecureChannel, so all of them speak the same way.
#ifndef SPOTPS_COMMON_CHANNEL_SECURITY_H_
#define SPOTPS_COMMON_CHANNEL_SECURITY_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace spotps {

// PEM texts and token, copied into each channel. The default is plaintext
// without a token (the loopback setups need nothing more).
struct ChannelSecurity {
  // TLS iff set: the CA that signed the servers' certificates.
  std::string ca_pem;
  // Both or neither: the client certificate a server under mTLS requires.
  std::string cert_pem;
  std::string key_pem;
  // Sent as "authorization: Bearer <token>" on every call; empty: none.
  std::string bearer_token;
};

// Reads the files (each may be empty: not used). INVALID_ARGUMENT for a
// certificate without its key (or the reverse), a certificate without a CA,
// or a token file that does not hold one well-formed token; NOT_FOUND for a
// missing file.
absl::StatusOr<ChannelSecurity> LoadChannelSecurity(const std::string& ca_file,
                                                    const std::string& cert_file,
                                                    const std::string& key_file,
                                                    const std::string& token_file);

// The token in a token file: its first line that is neither empty nor a
// comment (#), without surrounding whitespace. INVALID_ARGUMENT unless it is
// 16 to 256 printable characters without spaces.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// True if `token` is 16 to 256 printable ASCII characters without spaces.
bool IsWellFormedToken(const std::string& token);

// A channel to `address` with `args`, TLS when security.ca_pem is set, and
// the token attached to every call (by a client interceptor, so that it is
// sent over plaintext loopback connections too).
std::shared_ptr<grpc::Channel> CreateSecureChannel(const std::string& address,
                                                   const ChannelSecurity& security,
                                                   const grpc::ChannelArguments& args);

}  // namespace spotps

#endif  // SPOTPS_COMMON_CHANNEL_SECURITY_H_
