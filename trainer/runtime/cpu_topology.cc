#include "trainer/runtime/cpu_topology.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace spotps {
namespace {

std::optional<int> ReadIntFile(const std::string& path) {
  std::ifstream file(path);
  int value = 0;
  if (!(file >> value)) return std::nullopt;
  return value;
}

}  // namespace

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

int CountCoresOfCpus(absl::string_view sysfs_cpu_dir, absl::Span<const int> cpus) {
  std::set<std::pair<int, int>> cores;
  for (int cpu : cpus) {
    const std::string topology = absl::StrCat(sysfs_cpu_dir, "/cpu", cpu, "/topology/");
    const std::optional<int> package = ReadIntFile(topology + "physical_package_id");
    const std::optional<int> core = ReadIntFile(topology + "core_id");
    if (!package || !core) return static_cast<int>(cpus.size());
    cores.emplace(*package, *core);
  }
  return static_cast<int>(cores.size());
}

int CountPhysicalCores() {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.empty()) {
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  return std::max(1, CountCoresOfCpus("/sys/devices/system/cpu", cpus));
}

}  // namespace spotps
