// TokenTable: the bearer tokens a shard accepts and the role each grants,
// from the file --auth_tokens names.
//
// File format: one "TOKEN ROLE" per line (ROLE: reader, trainer or admin);
// blank lines and lines starting with # are ignored. A token is 16 to 256
// printable characters without spaces; a duplicate token, an unknown role or
// a malformed line refuses the whole file.
#ifndef SPOTPS_PS_RPC_TOKEN_TABLE_H_
#define SPOTPS_PS_RPC_TOKEN_TABLE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ps/rpc/access_policy.h"

namespace spotps {

// Immutable after Parse/Load; thread-safe to read.
class TokenTable {
 public:
  // INVALID_ARGUMENT naming the line for anything the format refuses.
  static absl::StatusOr<TokenTable> Parse(absl::string_view text, absl::string_view source);
  // Parse of the file; logs a warning when group or others may read it.
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // The role `token` grants, or nullopt. Compares against every entry in
  // time that depends neither on where the tokens differ nor on which entry
  // matched, so a caller cannot guess a token byte by byte.
  std::optional<Role> RoleOf(absl::string_view token) const;
  // Which entry (0-based, in file order) `token` is, compared the same way.
  std::optional<size_t> IndexOf(absl::string_view token) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string token;
    Role role;
  };
  std::vector<Entry> entries_;
};

}  // namespace spotps

#endif  // SPOTPS_PS_RPC_TOKEN_TABLE_H_
