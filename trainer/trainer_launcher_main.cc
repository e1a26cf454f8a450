// spotps-trainer: starts spotps-trainer-core, the trainer itself, from the
// same folder with glibc's malloc backing the heap with transparent huge
// pages (GLIBC_TUNABLES=glibc.malloc.hugetlb=1).
//
// Why a separate process image: glibc reads its tunables only when a process
// starts, before main(), and the trainer's start is where they pay: on a
// paravirtualized host (each page fault a VM exit) faults were 20-26% of a
// joining trainer's samples up to its first push, and 2 MB pages cut that
// first push by ~0.4 s (docs/architecture.md, "The trainer"). This
// program links only the C/C++ runtime, so it adds about a millisecond.
// A GLIBC_TUNABLES that already names glibc.malloc.hugetlb is kept as it is:
// glibc.malloc.hugetlb=0 turns the huge pages off.
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr char kCore[] = "spotps-trainer-core";
constexpr char kHugePages[] = "glibc.malloc.hugetlb=1";
constexpr int kExitRuntimeError = 1;  // As common/exit_status.h.

// The folder this program was started from, with a trailing '/'.
std::string OwnFolder() {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  const std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1);
}

}  // namespace

int main(int argc, char** argv) {
  (void)argc;
  const std::string folder = OwnFolder();
  if (folder.empty()) {
    std::fprintf(stderr, "spotps-trainer: cannot read /proc/self/exe: %s\n", std::strerror(errno));
    return kExitRuntimeError;
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  std::string value = tunables == nullptr ? "" : tunables;
  if (value.find("glibc.malloc.hugetlb") == std::string::npos) {
    value = value.empty() ? kHugePages : value + ":" + kHugePages;
    setenv("GLIBC_TUNABLES", value.c_str(), 1);
  }
  const std::string core = folder + kCore;
  execv(core.c_str(), argv);  // argv[0] stays: ps and pkill -f see spotps-trainer.
  std::fprintf(stderr, "spotps-trainer: cannot start %s: %s\n", core.c_str(), std::strerror(errno));
  return kExitRuntimeError;
}
