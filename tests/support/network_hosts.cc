#include "tests/support/network_hosts.h"

#include <arpa/inet.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace spotps::testing {
namespace {

constexpr char kPrefix[] = "spotps-nh-";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together.
};

// Runs argv[0] (an absolute path) without a shell and collects its output.
CommandResult RunCommand(const std::vector<std::string>& argv) {
  CommandResult result;
  int fds[2];
  if (pipe(fds) != 0) return result;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return result;
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof(buffer))) > 0) result.output.append(buffer, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

absl::Status Check(const std::vector<std::string>& argv) {
  CommandResult r = RunCommand(argv);
  if (r.exit_code == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("`", absl::StrJoin(argv, " "), "` exited ", r.exit_code,
                                          ": ", absl::StripTrailingAsciiWhitespace(r.output)));
}

std::vector<std::string> Ip(std::vector<std::string> args) {
  args.insert(args.begin(), IpBinary());
  return args;
}

// Names in `ip netns list` (its lines are "NAME" or "NAME (id: N)").
std::vector<std::string> ListNamespaces() {
  std::vector<std::string> names;
  for (absl::string_view line : absl::StrSplit(RunCommand(Ip({"netns", "list"})).output, '\n')) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!words.empty()) names.emplace_back(words[0]);
  }
  return names;
}

// SIGKILLs every process inside namespace `ns`, then deletes it.
void DeleteNamespace(const std::string& ns) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    CommandResult pids = RunCommand(Ip({"netns", "pids", ns}));
    bool any = false;
    for (absl::string_view p : absl::StrSplit(pids.output, '\n', absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(p, &pid) && pid > 1) {
        kill(pid, SIGKILL);
        any = true;
      }
    }
    if (!any) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  RunCommand(Ip({"netns", "delete", ns}));
}

struct Cidr {
  uint32_t base = 0;
  int bits = 0;
};

bool ParseCidr(absl::string_view text, Cidr* out) {
  std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(text, '/');
  int bits = 32;
  if (!parts.second.empty() && !absl::SimpleAtoi(parts.second, &bits)) return false;
  in_addr a{};
  if (bits < 0 || bits > 32 || inet_pton(AF_INET, std::string(parts.first).c_str(), &a) != 1) {
    return false;
  }
  const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
  *out = {ntohl(a.s_addr) & mask, bits};
  return true;
}

bool Overlap(const Cidr& a, const Cidr& b) {
  const int bits = std::min(a.bits, b.bits);
  const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
  return (a.base & mask) == (b.base & mask);
}

// True if `text` says the kernel lacks the qdisc (rather than, say, a typo).
bool QdiscUnsupported(const std::string& text) {
  for (const char* marker : {"Unknown qdisc", "No such file or directory", "not supported",
                             "Specified qdisc kind is unknown"}) {
    if (text.find(marker) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

std::string IpBinary() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

absl::StatusOr<std::string> NetworkHosts::PickUnusedSubnet() {
  std::vector<Cidr> used;
  for (const std::vector<std::string>& cmd :
       {Ip({"-4", "-o", "addr", "show"}), Ip({"-4", "route", "show", "table", "all"})}) {
    CommandResult r = RunCommand(cmd);
    if (r.exit_code != 0) return absl::InternalError("cannot list addresses: " + r.output);
    for (absl::string_view line : absl::StrSplit(r.output, '\n', absl::SkipEmpty())) {
      for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
        // Addresses ("inet 192.0.2.2/24") and route destinations; "default"
        // (0.0.0.0/0) overlaps everything by design and is skipped.
        Cidr c;
        if (word.find('.') != absl::string_view::npos && ParseCidr(word, &c) && c.bits > 0) {
          used.push_back(c);
        }
      }
    }
  }
  // Private 10.213.x.0/24 ranges, rarely used by clouds, VPNs or Docker.
  for (int third = 77; third < 120; ++third) {
    const std::string subnet = absl::StrCat("10.213.", third, ".0/24");
    Cidr candidate;
    ParseCidr(subnet, &candidate);
    bool clash = false;
    for (const Cidr& u : used) clash = clash || Overlap(u, candidate);
    if (!clash) return subnet;
  }
  return absl::FailedPreconditionError("every candidate subnet 10.213.77-119.0/24 is in use");
}

int NetworkHosts::SweepLeftovers() {
  int removed = 0;
  for (const std::string& ns : ListNamespaces()) {
    if (ns.rfind(kPrefix, 0) != 0) continue;
    // spotps-nh-<pid>-<n>-<role>
    std::vector<std::string> parts = absl::StrSplit(ns.substr(sizeof(kPrefix) - 1), '-');
    int pid = 0;
    if (parts.empty() || !absl::SimpleAtoi(parts[0], &pid)) continue;
    if (pid == getpid() || kill(pid, 0) == 0) continue;  // Its process still runs.
    DeleteNamespace(ns);
    ++removed;
  }
  return removed;
}

absl::StatusOr<std::unique_ptr<NetworkHosts>> NetworkHosts::Create(
    const std::vector<HostSpec>& hosts) {
  if (IpBinary().empty()) return absl::FailedPreconditionError("no `ip` binary: install iproute2");
  if (geteuid() != 0) {
    return absl::FailedPreconditionError("network namespaces need root (CAP_NET_ADMIN)");
  }
  if (hosts.empty() || hosts.size() > 200) return absl::InvalidArgumentError("1 to 200 hosts");
  SweepLeftovers();
  static std::atomic<int> counter{0};
  auto h = std::unique_ptr<NetworkHosts>(new NetworkHosts());
  h->prefix_ = absl::StrCat(kPrefix, getpid(), "-", counter++);
  absl::StatusOr<std::string> subnet = PickUnusedSubnet();
  if (!subnet.ok()) return subnet.status();
  h->subnet_ = *subnet;
  absl::Status s = h->Build(hosts);
  if (!s.ok()) return s;  // The destructor removes what was built.
  return h;
}

absl::Status NetworkHosts::Build(const std::vector<HostSpec>& hosts) {
  const std::string net = subnet_.substr(0, subnet_.rfind('.') + 1);  // "10.213.77."
  bridge_ns_ = prefix_ + "-br";
  // Recorded before it exists, so a failure below still removes it.
  namespaces_.clear();
  if (absl::Status s = Check(Ip({"netns", "add", bridge_ns_})); !s.ok()) {
    bridge_ns_.clear();
    return absl::FailedPreconditionError(
        absl::StrCat("`ip netns add` failed (are we root, with a kernel that has network "
                     "namespaces?): ",
                     s.message()));
  }
  for (const std::vector<std::string>& cmd :
       {Ip({"-n", bridge_ns_, "link", "add", "br0", "type", "bridge"}),
        Ip({"-n", bridge_ns_, "link", "set", "br0", "up"})}) {
    if (absl::Status s = Check(cmd); !s.ok()) return s;
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    const std::string ns = absl::StrCat(prefix_, "-h", i);
    const std::string port = absl::StrCat("v", i);
    const std::string address = absl::StrCat(net, 11 + i);
    if (absl::Status s = Check(Ip({"netns", "add", ns})); !s.ok()) return s;
    namespaces_.push_back(ns);
    addresses_.push_back(address);
    // The pair is created inside the bridge namespace with its other end
    // straight in the host's: it never appears in the root namespace.
    for (const std::vector<std::string>& cmd : {
             Ip({"-n", bridge_ns_, "link", "add", port, "type", "veth", "peer", "name", "eth0",
                 "netns", ns}),
             Ip({"-n", bridge_ns_, "link", "set", port, "master", "br0"}),
             Ip({"-n", bridge_ns_, "link", "set", port, "up"}),
             Ip({"-n", ns, "addr", "add", address + "/24", "dev", "eth0"}),
             Ip({"-n", ns, "link", "set", "eth0", "up"}),
         }) {
      if (absl::Status s = Check(cmd); !s.ok()) return s;
    }
    if (hosts[i].mbit_s > 0) {
      // tbf in both directions: eth0 egress is what the host sends, the
      // bridge port's egress is what it receives. Burst: 10 ms at the rate.
      const std::string rate = absl::StrCat(hosts[i].mbit_s, "mbit");
      const std::string burst = absl::StrCat(std::max<int64_t>(hosts[i].mbit_s * 1250, 64 * 1024));
      for (const auto& [where, dev] : {std::pair{ns, std::string("eth0")}, std::pair{bridge_ns_, port}}) {
        std::vector<std::string> tc = {"netns", "exec", where, "tc", "qdisc", "add", "dev", dev,
                                       "root", "tbf", "rate", rate, "burst", burst, "latency",
                                       "50ms"};
        CommandResult r = RunCommand(Ip(tc));
        if (r.exit_code != 0) {
          const std::string message = absl::StrCat("tbf on ", hosts[i].name, " (`tc ",
                                                   absl::StrJoin(tc.begin() + 3, tc.end(), " "),
                                                   "`): ", r.output);
          return QdiscUnsupported(r.output) ? absl::UnimplementedError(message)
                                            : absl::InternalError(message);
        }
      }
    }
  }
  return absl::OkStatus();
}

NetworkHosts::~NetworkHosts() { Destroy(); }

void NetworkHosts::Destroy() {
  for (const std::string& ns : namespaces_) DeleteNamespace(ns);
  if (!bridge_ns_.empty()) DeleteNamespace(bridge_ns_);
  namespaces_.clear();
  bridge_ns_.clear();
}

std::vector<std::string> NetworkHosts::Command(int i, const std::vector<std::string>& argv) const {
  std::vector<std::string> full = Ip({"netns", "exec", namespaces_[i]});
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

absl::StatusOr<std::string> NetworkHosts::Run(int i, const std::vector<std::string>& argv) const {
  const std::vector<std::string> full = Command(i, argv);
  CommandResult r = RunCommand(full);
  if (r.exit_code != 0) {
    return absl::InternalError(
        absl::StrCat("`", absl::StrJoin(full, " "), "` exited ", r.exit_code, ": ", r.output));
  }
  return r.output;
}

std::vector<std::string> NetworkHosts::ExistingNamespaces() const {
  std::vector<std::string> found;
  for (const std::string& ns : ListNamespaces()) {
    if (ns.rfind(prefix_ + "-", 0) == 0) found.push_back(ns);
  }
  return found;
}

}  // namespace spotps::testing
