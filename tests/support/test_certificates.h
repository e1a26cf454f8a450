// TestCertificates: a throwaway PKI made with the openssl command at test
// time -- a CA, a server certificate for 127.0.0.1/localhost (usable as a
// client certificate too, as shard 0 uses it towards its peers), a client
// certificate, and a certificate from a second, untrusted CA.
#ifndef SPOTPS_TESTS_SUPPORT_TEST_CERTIFICATES_H_
#define SPOTPS_TESTS_SUPPORT_TEST_CERTIFICATES_H_

#include <string>

#include "absl/status/statusor.h"

namespace spotps::testing {

struct TestCertificates {
  std::string ca;                       // ca.pem
  std::string server_cert, server_key;  // server.pem, server.key
  std::string client_cert, client_key;  // client.pem, client.key
  std::string rogue_cert, rogue_key;    // Signed by another CA.
};

// Writes the files into `dir` (which must exist) and returns their paths.
// INTERNAL with openssl's output when a command fails.
absl::StatusOr<TestCertificates> MakeTestCertificates(const std::string& dir);

}  // namespace spotps::testing

#endif  // SPOTPS_TESTS_SUPPORT_TEST_CERTIFICATES_H_
