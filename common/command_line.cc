#include "common/command_line.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/exit_status.h"
#include "common/log.h"

ABSL_FLAG(bool, check_flags, false,
          "Validate the flags as for a start, then exit 0 (2 if they are wrong) without touching "
          "files, ports or peers.");
ABSL_FLAG(bool, version, false, "Print the version and exit 0.");

namespace spotps {
namespace {

// The flags ParseFlags set, by name: written while parsing, read after.
std::set<std::string>& GivenFlags() {
  static auto* given = new std::set<std::string>();
  return *given;
}

struct FlagSetting {
  absl::CommandLineFlag* flag = nullptr;  // Null: no such flag.
  std::optional<std::string> value;       // None: the next argument is the value.
};

// Resolves "name=value", "name", or "noname" for a boolean flag.
FlagSetting ResolveFlag(absl::string_view spec) {
  std::pair<absl::string_view, absl::string_view> kv =
      absl::StrSplit(spec, absl::MaxSplits('=', 1));
  FlagSetting s{absl::FindCommandLineFlag(kv.first), std::nullopt};
  if (spec.find('=') != absl::string_view::npos) {
    s.value = std::string(kv.second);
  } else if (s.flag != nullptr) {
    if (s.flag->IsOfType<bool>()) s.value = "true";
  } else if (absl::string_view name = kv.first; absl::ConsumePrefix(&name, "no")) {
    absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name);
    if (negated != nullptr && negated->IsOfType<bool>()) s = {negated, "false"};
  }
  return s;
}

// Sets the flag that `arg` ("--name=value", "--name value", "--[no]bool")
// names; *next_arg moves past a value taken from the next argument.
absl::Status ApplyFlag(absl::string_view arg, int argc, char** argv, int* next_arg) {
  FlagSetting s = ResolveFlag(absl::StripPrefix(absl::StripPrefix(arg, "-"), "-"));
  if (s.flag == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown flag '", arg, "'"));
  }
  if (!s.value.has_value()) {
    if (*next_arg >= argc) {
      return absl::InvalidArgumentError(absl::StrCat("flag '", arg, "' needs a value"));
    }
    s.value = argv[(*next_arg)++];
  }
  std::string error;
  if (!s.flag->ParseFrom(*s.value, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad value for --", s.flag->Name(), ": ", error));
  }
  GivenFlags().insert(std::string(s.flag->Name()));
  return absl::OkStatus();
}

// absl::ProgramUsageMessage(), then every flag this program defines (not
// absl's own), sorted, with its default and help.
std::string HelpText() {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!absl::StrContains(flag->Filename(), "absl/")) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::string text = absl::StrCat(absl::ProgramUsageMessage(), "\n\nflags:\n");
  for (const absl::CommandLineFlag* flag : flags) {
    absl::StrAppend(&text, "  --", flag->Name(), "=", flag->DefaultValue(), "\n      ",
                    flag->Help(), "\n");
  }
  absl::StrAppend(&text, "\nexit status: 0 success, 1 runtime failure, 2 bad usage\n");
  return text;
}

}  // namespace

bool FlagGiven(absl::string_view name) { return GivenFlags().count(std::string(name)) != 0; }

bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "-h") return true;
  }
  return false;
}

// Applies the flags and returns the other arguments. Not absl::ParseCommandLine:
// it exits 1 on a bad flag, and a bad flag is a usage error (2) here.
absl::StatusOr<std::vector<std::string>> ParseFlags(int argc, char** argv) {
  std::vector<std::string> positional;
  int i = 1;
  while (i < argc) {
    const absl::string_view arg = argv[i++];
    if (arg == "--") {
      positional.insert(positional.end(), argv + i, argv + argc);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.emplace_back(arg);
      continue;
    }
    if (absl::Status s = ApplyFlag(arg, argc, argv, &i); !s.ok()) return s;
  }
  return positional;
}

void ParseFlagsOrExit(int argc, char** argv) {
  if (WantsHelp(argc, argv)) {
    std::fputs(HelpText().c_str(), stdout);
    std::exit(kExitSuccess);
  }
  absl::StatusOr<std::vector<std::string>> positional = ParseFlags(argc, argv);
  if (positional.ok() && PrintVersionIfAsked()) std::exit(kExitSuccess);
  if (positional.ok() && !positional->empty()) {
    positional = absl::InvalidArgumentError(absl::StrCat(
        "unexpected argument '", positional->front(), "' (this program takes flags only)"));
  }
  if (!positional.ok()) std::exit(UsageError(positional.status()));
}

bool PrintVersionIfAsked() {
  if (!absl::GetFlag(FLAGS_version)) return false;
  std::printf("%s %s\n", LogProgramName().c_str(), SPOTPS_VERSION);
  return true;
}

bool CheckFlagsOnly() { return absl::GetFlag(FLAGS_check_flags); }

}  // namespace spotps
