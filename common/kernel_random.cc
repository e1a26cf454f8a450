#include "common/kernel_random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace spotps {

std::string KernelRandomBytes(size_t n) {
  std::string bytes(n, '\0');
  size_t filled = 0;
  while (filled < n) {
    const ssize_t got = getrandom(bytes.data() + filled, n - filled, 0);
    if (got > 0) filled += static_cast<size_t>(got);
    if (got < 0 && errno != EINTR) std::abort();
  }
  return bytes;
}

uint64_t KernelRandomU64() {
  const std::string bytes = KernelRandomBytes(sizeof(uint64_t));
  uint64_t value;
  std::memcpy(&value, bytes.data(), sizeof(value));
  return value;
}

}  // namespace spotps
