#include "common/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace spotps {
namespace {

constexpr uint32_t kReflectedPolynomial = 0x82F63B78u;

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? kReflectedPolynomial : 0);
    table[byte] = crc;
  }
  return table;
}

// One byte at a time, on a pre-inverted CRC: only for CPUs without the
// CRC32 instruction.
uint32_t ExtendPortable(uint32_t crc, const unsigned char* p, size_t n) {
  static const std::array<uint32_t, 256> kTable = MakeTable();
  for (size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
// Advances kLanes pre-inverted CRCs over the same bytes. Each lane is one
// chain of dependent crc32 instructions, and the CPU overlaps the chains.
template <int kLanes>
__attribute__((target("sse4.2"))) void ExtendSse42(uint32_t* crcs, const unsigned char* p,
                                                   size_t n) {
  uint64_t wide[kLanes];
  for (int l = 0; l < kLanes; ++l) wide[l] = crcs[l];
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, sizeof(word));
    for (int l = 0; l < kLanes; ++l) wide[l] = _mm_crc32_u64(wide[l], word);
  }
  for (int l = 0; l < kLanes; ++l) crcs[l] = static_cast<uint32_t>(wide[l]);
  for (; n > 0; ++p, --n) {
    for (int l = 0; l < kLanes; ++l) crcs[l] = _mm_crc32_u8(crcs[l], *p);
  }
}

bool HasCrc32Instruction() {
  static const bool kHas = __builtin_cpu_supports("sse4.2");
  return kHas;
}
#endif

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;  // CRC-32C starts from all ones and inverts the result.
#if defined(__x86_64__)
  if (HasCrc32Instruction()) {
    ExtendSse42<1>(&crc, p, n);
    return ~crc;
  }
#endif
  return ~ExtendPortable(crc, p, n);
}

void Crc32cExtendTwo(uint32_t* first, uint32_t* second, const void* data, size_t n) {
#if defined(__x86_64__)
  if (HasCrc32Instruction()) {
    uint32_t crcs[2] = {~*first, ~*second};
    ExtendSse42<2>(crcs, static_cast<const unsigned char*>(data), n);
    *first = ~crcs[0];
    *second = ~crcs[1];
    return;
  }
#endif
  *first = Crc32cExtend(*first, data, n);
  *second = Crc32cExtend(*second, data, n);
}

}  // namespace spotps
