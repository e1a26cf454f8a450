// Where a training sample comes from, as a pure function of (seed, unit,
// sample index): any worker can rebuild any work unit's batch.

#ifndef SPOTPS_TRAINER_DATA_SAMPLE_HASH_H_
#define SPOTPS_TRAINER_DATA_SAMPLE_HASH_H_

#include <cstdint>

namespace spotps {

// SplitMix64's finalizer: a bijection that spreads every input bit.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A position in [0, range) for sample `sample` of work unit `unit`; the
// bias is at most range / 2^64 (a multiply, not a division).
inline int64_t SamplePosition(uint64_t seed, uint64_t unit, uint64_t sample, uint64_t range) {
  const uint64_t hash = Mix64(Mix64(Mix64(seed) ^ unit) ^ sample);
  return static_cast<int64_t>((static_cast<unsigned __int128>(hash) * range) >> 64);
}

}  // namespace spotps

#endif  // SPOTPS_TRAINER_DATA_SAMPLE_HASH_H_
