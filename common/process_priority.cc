#include "common/process_priority.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/log.h"

namespace spotps {

std::vector<int> ThreadIdsOfThisProcess() {
  std::vector<int> ids;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return ids;
  while (const dirent* entry = ::readdir(dir)) {
    int id = 0;
    if (absl::SimpleAtoi(entry->d_name, &id)) ids.push_back(id);
  }
  ::closedir(dir);
  return ids;
}

void AddNiceValue(int nice, absl::string_view flag) {
  if (nice <= 0) return;
  for (int id : ThreadIdsOfThisProcess()) {
    // getpriority may return -1 as a value: only errno tells a failure.
    errno = 0;
    const int now = ::getpriority(PRIO_PROCESS, static_cast<id_t>(id));
    if (errno != 0) continue;  // The thread has ended.
    if (::setpriority(PRIO_PROCESS, static_cast<id_t>(id), std::min(19, now + nice)) != 0 &&
        errno != ESRCH) {
      LogWarningF("%s=%d: thread %d: %s", std::string(flag), nice, id, std::strerror(errno));
    }
  }
}

}  // namespace spotps
