#ifndef SPOTPS_COMMON_HEAP_RETENTION_H_
#define SPOTPS_COMMON_HEAP_RETENTION_H_

#include <cstddef>

namespace spotps {

// Makes glibc's malloc keep the memory a process frees, so the next
// allocations of the same sizes reuse pages already mapped. For processes
// that allocate and free the same large blocks over and over: a trainer's
// step (LibTorch's activations), every step alike.
//
// Why: by default glibc maps each block above its mmap threshold afresh and
// unmaps it when freed, and gives the freed top of the heap back to the
// kernel, so every step takes a page fault per 4 KB page it touches again
// (`small` at batch 16 x 256: its step ran 1.5x faster once they stopped,
// on a paravirtualized host where a fault costs microseconds). After this
// call blocks up to kMaxRetainedBlockBytes come from the heap and freed
// memory stays there: the process keeps its peak heap, which a trainer
// reaches every step anyway. Larger blocks are still mapped per allocation.
// Returns false if glibc refused a setting (or the C library is not glibc).
bool RetainFreedHeapMemory();

// glibc's largest mmap threshold on 64-bit hosts.
inline constexpr size_t kMaxRetainedBlockBytes = size_t{32} << 20;

}  // namespace spotps

#endif  // SPOTPS_COMMON_HEAP_RETENTION_H_
