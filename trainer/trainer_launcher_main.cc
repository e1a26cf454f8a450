// spotps-trainer: starts spotps-trainer-core, the trainer itself, from the
// same folder with glibc's malloc tuned for it (GLIBC_TUNABLES):
//   glibc.malloc.hugetlb=1: transparent huge pages back the heap. On a
//     paravirtualized host (each page fault a VM exit) faults were 20-26% of
//     a joining trainer's samples up to its first push, and 2 MB pages cut
//     that first push by ~0.4 s.
//   glibc.malloc.mmap_threshold=32 MiB, trim_threshold=64 MiB: tensors of
//     up to 32 MiB come from the heap from the first step on. Otherwise
//     glibc maps each large block on its own until its first frees raise the
//     threshold (to 32 MiB at most, and the trim threshold to twice that),
//     and with huge pages each such map faults in freshly zeroed 2 MB pages:
//     that cost a joining trainer 0.2-0.6 CPU-s of kernel time.
// Why a separate process image: glibc reads its tunables only when a process
// starts, before main(). This program links only the C/C++ runtime, so it
// adds about a millisecond (docs/architecture.md, "The trainer").
// A tunable GLIBC_TUNABLES already names is kept as it is:
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
// Each applies unless GLIBC_TUNABLES already names it.
constexpr const char* kTunables[][2] = {
    {"glibc.malloc.hugetlb", "1"},
    {"glibc.malloc.mmap_threshold", "33554432"},
    {"glibc.malloc.trim_threshold", "67108864"},
};
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
  for (const auto& [name, setting] : kTunables) {
    if (value.find(std::string(name) + "=") != std::string::npos) continue;
    value += std::string(value.empty() ? "" : ":") + name + "=" + setting;
  }
  setenv("GLIBC_TUNABLES", value.c_str(), 1);
  const std::string core = folder + kCore;
  execv(core.c_str(), argv);  // argv[0] stays: ps and pkill -f see spotps-trainer.
  std::fprintf(stderr, "spotps-trainer: cannot start %s: %s\n", core.c_str(), std::strerror(errno));
  return kExitRuntimeError;
}
