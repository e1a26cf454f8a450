// NetworkHosts: "hosts" for multi-host tests on one machine. Each host is a
// network namespace with one address on a private /24 and an `eth0` (a
// veth pair) plugged into a bridge that lives in a namespace of its own, so
// nothing in the root namespace changes: no interface, address or route.
// Loopback stays down in every host, so a process that tried 127.0.0.1, or
// its own address, would fail: traffic goes over the veths.
//
// Each host's link can be capped with the tbf qdisc, in both directions.
// Needs root (CAP_NET_ADMIN) and iproute2; Create() fails with a clear
// message otherwise. Namespaces are named spotps-nh-<pid>-<n>-<role>; every
// Create() first sweeps the namespaces of processes that no longer run.
#ifndef SPOTPS_TESTS_SUPPORT_NETWORK_HOSTS_H_
#define SPOTPS_TESTS_SUPPORT_NETWORK_HOSTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace spotps::testing {

struct HostSpec {
  std::string name;    // For messages only, e.g. "shard0".
  int64_t mbit_s = 0;  // Link rate cap, both directions; 0: none.
};

class NetworkHosts {
 public:
  // Creates the bridge namespace and one namespace per host. A cap the
  // kernel cannot apply (no tbf) is UNIMPLEMENTED; anything else that fails
  // is an error naming the command. Whatever was created is removed again.
  static absl::StatusOr<std::unique_ptr<NetworkHosts>> Create(const std::vector<HostSpec>& hosts);
  // Kills every process still inside the namespaces, then deletes them
  // (their veths and the bridge go with them).
  ~NetworkHosts();
  NetworkHosts(const NetworkHosts&) = delete;
  NetworkHosts& operator=(const NetworkHosts&) = delete;

  int size() const { return static_cast<int>(namespaces_.size()); }
  // Host i's IPv4 address, e.g. "10.213.77.11".
  const std::string& address(int i) const { return addresses_[i]; }
  const std::string& namespace_name(int i) const { return namespaces_[i]; }
  // The /24 in use, e.g. "10.213.77.0/24".
  const std::string& subnet() const { return subnet_; }
  // `argv` run inside host i: "ip netns exec <ns> argv...".
  std::vector<std::string> Command(int i, const std::vector<std::string>& argv) const;
  // The output of `argv` run inside host i (fails if it exits non-zero).
  absl::StatusOr<std::string> Run(int i, const std::vector<std::string>& argv) const;

  // Names of this run's namespaces that exist (for leak checks).
  std::vector<std::string> ExistingNamespaces() const;
  // Removes namespaces left by earlier runs whose process is gone; returns
  // how many. Create() calls it.
  static int SweepLeftovers();
  // The first candidate /24 that overlaps no address or route of the root
  // namespace (from `ip -4 addr` and `ip -4 route show table all`).
  static absl::StatusOr<std::string> PickUnusedSubnet();

 private:
  NetworkHosts() = default;
  absl::Status Build(const std::vector<HostSpec>& hosts);
  void Destroy();

  std::string prefix_;        // spotps-nh-<pid>-<n>
  std::string bridge_ns_;     // <prefix>-br
  std::vector<std::string> namespaces_;
  std::vector<std::string> addresses_;
  std::string subnet_;
};

// Path of the `ip` binary (iproute2), or "" if there is none.
std::string IpBinary();

}  // namespace spotps::testing

#endif  // SPOTPS_TESTS_SUPPORT_NETWORK_HOSTS_H_
