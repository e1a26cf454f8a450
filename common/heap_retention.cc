#include "common/heap_retention.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace spotps {

bool RetainFreedHeapMemory() {
#if defined(__GLIBC__)
  // Fixing either threshold also stops glibc's own adjustment of both.
  // A trim threshold of -1 turns trimming off (mallopt(3)).
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMaxRetainedBlockBytes)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, -1) == 1;
#else
  return false;
#endif
}

}  // namespace spotps
