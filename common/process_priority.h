// AddNiceValue: a process's --nice, so that a shard or trainer can run
// below the other work on a host it shares.
#ifndef SPOTPS_COMMON_PROCESS_PRIORITY_H_
#define SPOTPS_COMMON_PROCESS_PRIORITY_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace spotps {

// The ids of this process's threads now (from /proc/self/task; empty where
// that cannot be read). On Linux each is a setpriority target of its own.
std::vector<int> ThreadIdsOfThisProcess();

// Adds `nice` (0-19; 0 changes nothing; the sum is capped at 19) to the
// nice value of every thread of this process, those that libraries' static
// initialisers started included, and so to every thread started later
// (threads inherit their creator's). Call it from main() before the threads
// that do the work exist. A refusal (none is expected: raising a nice value
// needs no privilege) is logged as a warning naming `flag`, and that thread
// goes on at its old priority.
void AddNiceValue(int nice, absl::string_view flag);

}  // namespace spotps

#endif  // SPOTPS_COMMON_PROCESS_PRIORITY_H_
