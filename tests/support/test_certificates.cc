#include "tests/support/test_certificates.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"

namespace spotps::testing {
namespace {

// EC keys: quick to make. serverAuth+clientAuth on the server certificate
// because shard 0 presents it to its peers.
constexpr char kScript[] = R"(set -e
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=$1" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=keyCertSign,cRLSign
}
leaf() {  # name ca-name extensions
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$1"
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -out "$1.pem" \
    -days 2 -extfile "$1.ext" 2>/dev/null
}
ca ca
ca other-ca
leaf server ca "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth"
leaf client ca "extendedKeyUsage=clientAuth"
leaf rogue other-ca "extendedKeyUsage=clientAuth"
chmod 600 *.key
)";

}  // namespace

absl::StatusOr<TestCertificates> MakeTestCertificates(const std::string& dir) {
  const std::string script_path = absl::StrCat(dir, "/make-certs.sh");
  if (absl::Status s = WriteFileAtomically(script_path, kScript); !s.ok()) return s;
  const std::string log = absl::StrCat(dir, "/make-certs.log");
  const std::string command =
      absl::StrCat("cd '", dir, "' && bash make-certs.sh >'", log, "' 2>&1");
  if (std::system(command.c_str()) != 0) {
    absl::StatusOr<std::string> output = ReadFile(log);
    return absl::InternalError(
        absl::StrCat("openssl failed: ", output.ok() ? *output : std::string("(no log)")));
  }
  auto at = [&dir](const char* name) { return absl::StrCat(dir, "/", name); };
  return TestCertificates{at("ca.pem"),     at("server.pem"), at("server.key"), at("client.pem"),
                          at("client.key"), at("rogue.pem"),  at("rogue.key")};
}

}  // namespace spotps::testing
