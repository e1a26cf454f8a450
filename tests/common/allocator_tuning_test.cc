// Its own binary: the malloc settings are process-wide and the test needs a
// process that has not changed them yet.
//
// TuneAllocatorForBulkTransfers serves a trainer's steps as much as the
// transfers: each step allocates and frees the same activations, and with
// glibc's defaults each one faulted its pages in again.
#include "common/transport_args.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <memory>
#include <vector>

namespace spotps {
namespace {

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// One "training step": allocates blocks like a step's activations, writes
// every page, frees them all. Returns the page faults it took.
long Step(size_t blocks, size_t block_bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const long before = MinorFaults();
  std::vector<std::unique_ptr<char[]>> live;
  for (size_t b = 0; b < blocks; ++b) {
    live.emplace_back(new char[block_bytes]);
    volatile char* bytes = live.back().get();
    for (size_t at = 0; at < block_bytes; at += page) bytes[at] = 1;
  }
  live.clear();
  return MinorFaults() - before;
}

TEST(AllocatorTuningTest, RepeatedStepsReuseTheirPagesOnceTuned) {
  constexpr size_t kBlocks = 8, kBlockBytes = size_t{4} << 20;
  const long pages = kBlocks * kBlockBytes / sysconf(_SC_PAGESIZE);
  // glibc's defaults: the freed top of the heap goes back to the kernel, so
  // every step faults its pages in again.
  for (int warm = 0; warm < 2; ++warm) Step(kBlocks, kBlockBytes);
  const long by_default = Step(kBlocks, kBlockBytes);

  TuneAllocatorForBulkTransfers();
  Step(kBlocks, kBlockBytes);  // Grows the heap to the step's peak once.
  const long tuned = Step(kBlocks, kBlockBytes);
  std::printf("page faults per step of %ld pages: %ld by default, %ld tuned\n", pages,
              by_default, tuned);
  EXPECT_LT(tuned, pages / 20) << "by default: " << by_default << " faults";
  EXPECT_GT(by_default, 4 * tuned + 4) << "tuned: " << tuned << " faults";
}

}  // namespace
}  // namespace spotps
