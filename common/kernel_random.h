// Randomness from the kernel's CSPRNG (getrandom), for identifiers that
// must not repeat or be guessed: worker keys, push-id prefixes, job ids,
// shard incarnations.
#ifndef SPOTPS_COMMON_KERNEL_RANDOM_H_
#define SPOTPS_COMMON_KERNEL_RANDOM_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace spotps {

// n random bytes. Aborts where the kernel gives none (no safe identifier
// without randomness); a signal mid-read is retried.
std::string KernelRandomBytes(size_t n);

// A random 64-bit number, as KernelRandomBytes.
uint64_t KernelRandomU64();

}  // namespace spotps

#endif  // SPOTPS_COMMON_KERNEL_RANDOM_H_
