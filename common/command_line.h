// Command-line flags parsed the way every spotps binary wants: absl's flag
// syntax ("--name=value", "--name value", "--[no]bool"), but a bad flag is a
// usage error (exit status 2, see exit_status.h) instead of absl's exit 1.
#ifndef SPOTPS_COMMON_COMMAND_LINE_H_
#define SPOTPS_COMMON_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spotps {

// True if any argument asks for help (--help, -help, -h).
bool WantsHelp(int argc, char** argv);

// Sets every flag given and returns the other arguments in order.
// INVALID_ARGUMENT, saying which, for an unknown flag, a missing value or a
// value the flag cannot parse.
absl::StatusOr<std::vector<std::string>> ParseFlags(int argc, char** argv);

// True if ParseFlags set the flag `name` from the command line (to any
// value, its default included).
bool FlagGiven(absl::string_view name);

// For binaries that take flags only: --help prints the program's flags and
// --version its version, and both exit 0; a bad flag or any positional
// argument is logged and exits 2.
void ParseFlagsOrExit(int argc, char** argv);

// Under --version: prints "<program> <version>" and returns true.
bool PrintVersionIfAsked();

// True under --check_flags: the program validates its flags as it would to
// start, then exits 0 (or 2) before it touches files, ports or peers, so
// that deployment manifests can be checked against the real binary.
bool CheckFlagsOnly();

}  // namespace spotps

#endif  // SPOTPS_COMMON_COMMAND_LINE_H_
