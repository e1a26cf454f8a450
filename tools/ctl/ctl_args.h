// spotps-ctl's command line: "<command> [flags]" in any order, where a bad
// flag is a usage error (exit 2) rather than absl::ParseCommandLine's exit 1.
#ifndef SPOTPS_TOOLS_CTL_CTL_ARGS_H_
#define SPOTPS_TOOLS_CTL_CTL_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace spotps {

// The --help text: commands, then the flags named (defined with ABSL_FLAG)
// with their defaults and help, then the exit statuses.
std::string Usage(absl::Span<const absl::string_view> flag_names);

// True if any argument asks for help (--help, -help, -h).
bool WantsHelp(int argc, char** argv);

// Sets every flag given ("--name=value", "--name value", "--[no]bool") and
// returns the other arguments in order. INVALID_ARGUMENT, saying which, for
// an unknown flag, a missing value or a value the flag cannot parse.
absl::StatusOr<std::vector<std::string>> ParseArgs(int argc, char** argv);

}  // namespace spotps

#endif  // SPOTPS_TOOLS_CTL_CTL_ARGS_H_
