// ChildProcess and LocalShardCluster: real processes for multi-process tests
// and benchmarks, always cleaned up.
#ifndef SPOTPS_TESTS_SUPPORT_CHILD_PROCESS_H_
#define SPOTPS_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace spotps::testing {

// Path of a binary built by this project (build/bin/NAME).
std::string BinaryPath(const std::string& name);

// `n` distinct TCP ports on 127.0.0.1 that were free a moment ago.
absl::StatusOr<std::vector<int>> PickFreePorts(int n);

// A fresh directory under $TMPDIR, removed with its contents on destruction
// (kept when SPOTPS_KEEP_TEST_DIRS is set).
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Owns one child process. Promises: the child dies with SIGKILL if this
// object is destroyed while it runs, or if the parent dies (PDEATHSIG).
class ChildProcess {
 public:
  // Starts argv[0] with stdout and stderr appended to `log_path`.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv,
                                                             const std::string& log_path);
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool running();
  void Signal(int signo);
  // Waits for exit; returns the exit code (128 + signal if killed), or
  // DEADLINE_EXCEEDED.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  // The CPU time (user and system) it used, once it has exited and been
  // reaped (running() false); zero before.
  absl::Duration cpu_time() const { return cpu_time_; }
  // Waits until the log at `log_path` (Start's) holds `text`: OK, or
  // FAILED_PRECONDITION if the child exited first, or DEADLINE_EXCEEDED;
  // either error carries the log.
  absl::Status WaitForLog(const std::string& log_path, absl::string_view text,
                          absl::Duration timeout);

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  bool reaped_ = false;
  int exit_code_ = -1;
  absl::Duration cpu_time_;
};

// How a binary run to its end (RunToExit) ended.
struct ExitResult {
  int exit_code = -1;  // 128 + signal if it was killed.
  std::string output;  // Its stdout and stderr.
};
// Runs argv to its end with stdout and stderr appended to `log_path`; an
// error if it could not start or ran past `timeout` (it is killed then).
absl::StatusOr<ExitResult> RunToExit(const std::vector<std::string>& argv,
                                     const std::string& log_path, absl::Duration timeout);
// RunToExit, and INTERNAL with the exit code and output unless it exited 0.
absl::Status RunToSuccess(const std::vector<std::string>& argv, const std::string& log_path,
                          absl::Duration timeout);

// N spotps-ps processes on loopback with free ports, for one test.
class LocalShardCluster {
 public:
  // Flags for shard `index`, given the whole address list.
  using FlagsFor = std::function<std::vector<std::string>(int index, const std::string& addresses)>;

  // `extra_flags` are passed to every shard (optimizer, lr, ...).
  static absl::StatusOr<std::unique_ptr<LocalShardCluster>> Start(
      int num_shards, const std::vector<std::string>& extra_flags, const std::string& dir);
  // Ports are chosen before any shard starts, so flags may name them
  // (shard 0's --peers).
  static absl::StatusOr<std::unique_ptr<LocalShardCluster>> Start(int num_shards,
                                                                  const FlagsFor& flags_for,
                                                                  const std::string& dir);
  // Picks the ports and the flags but starts nothing, so that clients can be
  // pointed at shards that StartAll() starts later.
  static absl::StatusOr<std::unique_ptr<LocalShardCluster>> Reserve(int num_shards,
                                                                    const FlagsFor& flags_for,
                                                                    const std::string& dir);
  absl::Status StartAll();

  // "127.0.0.1:p0,127.0.0.1:p1,..." in shard order.
  const std::string& addresses() const { return addresses_; }
  ChildProcess& shard(int i) { return *shards_[i]; }
  int port(int i) const { return ports_[i]; }
  // Starts shard i again on its old port (after it was killed).
  absl::Status Restart(int i);

 private:
  absl::StatusOr<std::unique_ptr<ChildProcess>> StartShard(int i, int port);

  std::string dir_;
  std::vector<std::vector<std::string>> flags_;  // Per shard.
  std::vector<std::unique_ptr<ChildProcess>> shards_;
  std::vector<int> ports_;
  std::string addresses_;
};

}  // namespace spotps::testing

#endif  // SPOTPS_TESTS_SUPPORT_CHILD_PROCESS_H_
