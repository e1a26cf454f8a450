// Every binary follows one command-line convention: --version and a valid
// --check_flags exit 0 without starting anything; a bad flag value, an
// unknown flag, a stray argument or flags that do not validate exit 2.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/atomic_file.h"
#include "tests/support/child_process.h"

namespace spotps {
namespace {

using testing::BinaryPath;
using testing::ChildProcess;
using testing::TempDir;

using Outcome = testing::ExitResult;

class ExitStatusTest : public ::testing::Test {
 protected:
  Outcome RunBinary(const std::string& name, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {BinaryPath(name)};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log = absl::StrCat(dir_.path(), "/run", runs_++, ".log");
    absl::StatusOr<Outcome> run = testing::RunToExit(argv, log, absl::Seconds(120));
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *run : Outcome();
  }

  TempDir dir_;
  int runs_ = 0;
};

TEST_F(ExitStatusTest, EveryBinaryPrintsItsVersion) {
  for (const char* name :
       {"spotps-ps", "spotps-trainer", "spotps-ctl", "spotps-tokenize", "spotps-generate"}) {
    const Outcome r = RunBinary(name, {"--version"});
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.output;
    EXPECT_TRUE(absl::StartsWith(r.output, absl::StrCat(name, " "))) << r.output;
  }
}

// spotps-trainer starts spotps-trainer-core with glibc's malloc tuned (huge
// pages, thresholds), each unless GLIBC_TUNABLES already chooses
// (trainer/trainer_launcher_main.cc). Returns the core's GLIBC_TUNABLES, read while it runs
// `--version`.
std::string CoreTunables(const std::string& log) {
  auto child = ChildProcess::Start({BinaryPath("spotps-trainer"), "--version"}, log);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return "(not started)";
  const std::string proc = absl::StrCat("/proc/", (*child)->pid());
  std::string found = "(core never seen)";
  // The core loads LibTorch for ~0.4 s after the exec: time to look.
  for (int i = 0; i < 2000; ++i) {
    char exe[4096];
    const ssize_t n = readlink((proc + "/exe").c_str(), exe, sizeof(exe));
    // exe names the core as soon as exec switches the address space, but the
    // kernel copies the environment onto the new stack a little later; until
    // then environ reads empty. The core's is never empty here (it holds at
    // least GLIBC_TUNABLES), so empty means "look again". CI under Bazel hit
    // that window once.
    const std::string environ = ReadFile(proc + "/environ").value_or("");
    if (n > 0 && absl::EndsWith(absl::string_view(exe, n), "/spotps-trainer-core") &&
        !environ.empty()) {
      found = "(unset)";
      // glibc ends each tunable's value with a NUL in place as it parses
      // them, so the ones after the first read as entries of their own.
      bool in_tunables = false;
      for (absl::string_view var : absl::StrSplit(environ, '\0')) {
        if (in_tunables && absl::StartsWith(var, "glibc.")) {
          absl::StrAppend(&found, ":", var);
          continue;
        }
        in_tunables = absl::ConsumePrefix(&var, "GLIBC_TUNABLES=");
        if (in_tunables) found = std::string(var);
      }
      break;
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  absl::StatusOr<int> code = (*child)->Wait(absl::Seconds(60));
  EXPECT_TRUE(code.ok() && *code == 0) << ReadFile(log).value_or("");
  return found;
}

TEST_F(ExitStatusTest, TrainerStartsItsCoreWithItsMallocTunablesUnlessTold) {
  const std::string log = dir_.path() + "/launch.log";
  const std::string thresholds =
      "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=67108864";
  unsetenv("GLIBC_TUNABLES");
  EXPECT_EQ(CoreTunables(log), "glibc.malloc.hugetlb=1:" + thresholds);
  setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0", 1);
  EXPECT_EQ(CoreTunables(log), "glibc.malloc.hugetlb=0:" + thresholds);
  // A setting the caller chose is kept; the others are added.
  setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=1048576:glibc.malloc.hugetlb=0", 1);
  EXPECT_EQ(CoreTunables(log),
            "glibc.malloc.mmap_threshold=1048576:glibc.malloc.hugetlb=0:"
            "glibc.malloc.trim_threshold=67108864");
  unsetenv("GLIBC_TUNABLES");
}

TEST_F(ExitStatusTest, CheckFlagsValidatesWithoutStarting) {
  // A port nobody listens on: a shard that started would hold it.
  const Outcome ps =
      RunBinary("spotps-ps", {"--check_flags", "--listen=127.0.0.1:1", "--num_shards=2",
                              "--shard_index=1", "--optimizer=adamw"});
  EXPECT_EQ(ps.exit_code, 0) << ps.output;
  const Outcome trainer = RunBinary(
      "spotps-trainer", {"--check_flags", "--ps=shard-0.example:7000,shard-1.example:7000",
                         "--data=/does/not/exist.tokens", "--model=small", "--dtype=fp32"});
  EXPECT_EQ(trainer.exit_code, 0) << trainer.output;
  EXPECT_EQ(RunBinary("spotps-tokenize", {"--check_flags", "--input=a", "--output=b"}).exit_code,
            0);
}

TEST_F(ExitStatusTest, UsageErrorsExitTwo) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"spotps-ps", {"--lr=abc"}},
      {"spotps-ps", {"--no_such_flag=1"}},
      {"spotps-ps", {"stray"}},
      {"spotps-ps", {"--check_flags", "--num_shards=2", "--shard_index=2"}},
      {"spotps-trainer", {"--check_flags", "--ps=a:1", "--data=x", "--model=huge"}},
      {"spotps-trainer", {"--check_flags", "--ps=a:1", "--data=x", "--dtype=fp16"}},
      {"spotps-trainer", {"--check_flags", "--ps=a:1"}},  // No --data.
      {"spotps-tokenize", {"--check_flags", "--input=a"}},
      {"spotps-ctl", {"--bogus", "status"}},
  };
  for (const auto& [name, args] : cases) {
    const Outcome r = RunBinary(name, args);
    EXPECT_EQ(r.exit_code, 2) << name << " " << args.front() << ": " << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, absl::StrCat(name, ": "))) << r.output;
  }
}

}  // namespace
}  // namespace spotps
