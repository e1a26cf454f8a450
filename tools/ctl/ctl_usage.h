// spotps-ctl's --help text; the command line itself is parsed by
// common/command_line.h (flags and the command in any order).
#ifndef SPOTPS_TOOLS_CTL_CTL_USAGE_H_
#define SPOTPS_TOOLS_CTL_CTL_USAGE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace spotps {

// The --help text: commands, then the flags named (defined with ABSL_FLAG)
// with their defaults and help, then the exit statuses.
std::string Usage(absl::Span<const absl::string_view> flag_names);

}  // namespace spotps

#endif  // SPOTPS_TOOLS_CTL_CTL_USAGE_H_
