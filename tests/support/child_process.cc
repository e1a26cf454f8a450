#include "tests/support/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"

namespace spotps::testing {

std::string BinaryPath(const std::string& name) { return absl::StrCat(SPOTPS_BIN_DIR, "/", name); }

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string pattern = absl::StrCat(base != nullptr ? base : "/tmp", "/spotps-test-XXXXXX");
  path_ = mkdtemp(pattern.data()) != nullptr ? pattern : "";
}

TempDir::~TempDir() {
  std::error_code ec;
  // SPOTPS_KEEP_TEST_DIRS=1 keeps logs of a failed run for reading.
  if (getenv("SPOTPS_KEEP_TEST_DIRS") != nullptr) return;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid));
}

ChildProcess::~ChildProcess() {
  if (running()) {
    Signal(SIGKILL);
    Wait(absl::Seconds(10)).IgnoreError();
  }
}

bool ChildProcess::running() {
  if (reaped_) return false;
  int status = 0;
  struct rusage usage = {};
  const pid_t r = wait4(pid_, &status, WNOHANG, &usage);
  if (r == 0) return true;
  reaped_ = true;
  cpu_time_ = absl::DurationFromTimeval(usage.ru_utime) + absl::DurationFromTimeval(usage.ru_stime);
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return false;
}

void ChildProcess::Signal(int signo) {
  if (!reaped_) kill(pid_, signo);
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (running()) {
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(absl::StrCat("pid ", pid_, " still running"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return exit_code_;
}

absl::Status ChildProcess::WaitForLog(const std::string& log_path, absl::string_view text,
                                      absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    const std::string log = ReadFile(log_path).value_or("");
    if (absl::StrContains(log, text)) return absl::OkStatus();
    if (!running()) {
      return absl::FailedPreconditionError(
          absl::StrCat("pid ", pid_, " exited before its log said '", text, "': ", log));
    }
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(
          absl::StrCat("pid ", pid_, "'s log did not say '", text, "': ", log));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::StatusOr<ExitResult> RunToExit(const std::vector<std::string>& argv,
                                     const std::string& log_path, absl::Duration timeout) {
  auto child = ChildProcess::Start(argv, log_path);
  if (!child.ok()) return child.status();
  absl::StatusOr<int> code = (*child)->Wait(timeout);
  if (!code.ok()) return code.status();
  return ExitResult{*code, ReadFile(log_path).value_or("")};
}

absl::Status RunToSuccess(const std::vector<std::string>& argv, const std::string& log_path,
                          absl::Duration timeout) {
  absl::StatusOr<ExitResult> run = RunToExit(argv, log_path, timeout);
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) {
    return absl::InternalError(
        absl::StrCat(argv[0], " exited ", run->exit_code, ": ", run->output));
  }
  return absl::OkStatus();
}

namespace {

// Binds a socket to a free loopback port and returns it (or -1).
int BindFreePort(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace

absl::StatusOr<std::vector<int>> PickFreePorts(int n) {
  // All sockets stay bound until every port is chosen, so the kernel cannot
  // hand the same port out twice.
  std::vector<int> fds, ports(n);
  for (int i = 0; i < n; ++i) {
    const int fd = BindFreePort(&ports[i]);
    if (fd < 0) break;
    fds.push_back(fd);
  }
  for (int fd : fds) close(fd);
  if (static_cast<int>(fds.size()) != n) return absl::InternalError("cannot find free ports");
  return ports;
}

absl::StatusOr<std::unique_ptr<LocalShardCluster>> LocalShardCluster::Start(
    int num_shards, const std::vector<std::string>& extra_flags, const std::string& dir) {
  return Start(
      num_shards, [&](int, const std::string&) { return extra_flags; }, dir);
}

absl::StatusOr<std::unique_ptr<LocalShardCluster>> LocalShardCluster::Start(
    int num_shards, const FlagsFor& flags_for, const std::string& dir) {
  absl::StatusOr<std::unique_ptr<LocalShardCluster>> cluster = Reserve(num_shards, flags_for, dir);
  if (!cluster.ok()) return cluster;
  if (absl::Status s = (*cluster)->StartAll(); !s.ok()) return s;
  return cluster;
}

absl::StatusOr<std::unique_ptr<LocalShardCluster>> LocalShardCluster::Reserve(
    int num_shards, const FlagsFor& flags_for, const std::string& dir) {
  auto cluster = std::unique_ptr<LocalShardCluster>(new LocalShardCluster());
  cluster->dir_ = dir;
  absl::StatusOr<std::vector<int>> ports = PickFreePorts(num_shards);
  if (!ports.ok()) return ports.status();
  cluster->ports_ = *ports;
  std::vector<std::string> addresses;
  for (int port : cluster->ports_) addresses.push_back(absl::StrCat("127.0.0.1:", port));
  cluster->addresses_ = absl::StrJoin(addresses, ",");
  for (int i = 0; i < num_shards; ++i) {
    cluster->flags_.push_back(flags_for(i, cluster->addresses_));
  }
  return cluster;
}

absl::Status LocalShardCluster::StartAll() {
  for (size_t i = shards_.size(); i < ports_.size(); ++i) {
    absl::StatusOr<std::unique_ptr<ChildProcess>> shard = StartShard(static_cast<int>(i), ports_[i]);
    if (!shard.ok()) return shard.status();
    shards_.push_back(*std::move(shard));
  }
  return absl::OkStatus();
}

absl::Status LocalShardCluster::Restart(int i) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> shard = StartShard(i, ports_[i]);
  if (!shard.ok()) return shard.status();
  shards_[i] = *std::move(shard);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ChildProcess>> LocalShardCluster::StartShard(int i, int port) {
  const std::string port_file = absl::StrCat(dir_, "/shard", i, ".port");
  std::filesystem::remove(port_file);
  std::vector<std::string> argv = {
      BinaryPath("spotps-ps"), absl::StrCat("--listen=127.0.0.1:", port),
      absl::StrCat("--port_file=", port_file), absl::StrCat("--shard_index=", i),
      absl::StrCat("--num_shards=", ports_.size())};
  argv.insert(argv.end(), flags_[i].begin(), flags_[i].end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Start(argv, absl::StrCat(dir_, "/shard", i, ".log"));
  if (!child.ok()) return child.status();
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() < give_up) {
    absl::StatusOr<std::string> text = ReadFile(port_file);
    int bound = 0;
    if (text.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &bound) && bound > 0) {
      ports_[i] = bound;
      return child;
    }
    if (!(*child)->running()) {
      return absl::InternalError(
          absl::StrCat("shard ", i, " exited at start; see ", dir_, "/shard", i, ".log"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat("shard ", i, " did not report its port"));
}

}  // namespace spotps::testing
