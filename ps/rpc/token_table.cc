#include "ps/rpc/token_table.h"

#include <sys/stat.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "common/channel_security.h"
#include "common/log.h"

namespace spotps {
namespace {

constexpr size_t kMaxTokenBytes = 256;

// Equal iff same length and bytes; always reads kMaxTokenBytes of each.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned diff = static_cast<unsigned>(a.size() ^ b.size());
  for (size_t i = 0; i < kMaxTokenBytes; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text, absl::string_view source) {
  TokenTable table;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const std::string where = absl::StrCat(source, ":", line_number, ": ");
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(where, "expected 'TOKEN ROLE'"));
    }
    const std::string token(fields[0]);
    if (!IsWellFormedToken(token)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where,
                       "weak or malformed token: use 16 to 256 printable characters without spaces "
                       "(e.g. openssl rand -hex 32)"));
    }
    absl::StatusOr<Role> role = ParseRole(fields[1]);
    if (!role.ok()) return absl::InvalidArgumentError(absl::StrCat(where, role.status().message()));
    if (table.RoleOf(token).has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "duplicate token"));
    }
    table.entries_.push_back(Entry{token, *role});
  }
  if (table.entries_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, " holds no token"));
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    LogWarning(absl::StrCat("token file ", path, " can be read by other users; chmod 600 it"));
  }
  return Parse(*text, path);
}

std::optional<Role> TokenTable::RoleOf(absl::string_view token) const {
  const std::optional<size_t> index = IndexOf(token);
  if (!index.has_value()) return std::nullopt;
  return entries_[*index].role;
}

std::optional<size_t> TokenTable::IndexOf(absl::string_view token) const {
  std::optional<size_t> found;
  if (token.size() > kMaxTokenBytes) token = token.substr(0, 0);
  for (size_t i = 0; i < entries_.size(); ++i) {
    // No early exit: every entry is compared whatever matched before.
    if (ConstantTimeEquals(entries_[i].token, token)) found = i;
  }
  return found;
}

}  // namespace spotps
