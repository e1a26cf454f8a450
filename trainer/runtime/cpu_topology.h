// How many physical cores this process may run on. Intra-op threads beyond
// one per physical core only fight over the same FMA units (hyperthreads),
// so this count is the trainer's default thread budget.

#ifndef SPOTPS_TRAINER_RUNTIME_CPU_TOPOLOGY_H_
#define SPOTPS_TRAINER_RUNTIME_CPU_TOPOLOGY_H_

#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace spotps {

// Logical CPUs in this process's affinity mask (sched_getaffinity).
std::vector<int> AllowedCpus();

// Distinct (physical_package_id, core_id) pairs among `cpus`, read from
// `<sysfs_cpu_dir>/cpu<N>/topology/`. Falls back to cpus.size() when the
// topology files are unreadable (some containers hide them).
int CountCoresOfCpus(absl::string_view sysfs_cpu_dir, absl::Span<const int> cpus);

// CountCoresOfCpus(AllowedCpus()) on the real sysfs; at least 1.
int CountPhysicalCores();

}  // namespace spotps

#endif  // SPOTPS_TRAINER_RUNTIME_CPU_TOPOLOGY_H_
