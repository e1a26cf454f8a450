// CRC-32C (Castagnoli, as in iSCSI and ext4): the checksum of spotps' file
// formats. Uses the SSE4.2 crc32 instruction where the CPU has it.
#ifndef SPOTPS_COMMON_CRC32C_H_
#define SPOTPS_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace spotps {

// CRC-32C of n bytes at `data`, continuing from `crc` (0 to start), so that
// Crc32cExtend(Crc32cExtend(0, a), b) is the CRC of a followed by b.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

// Advances two CRCs over the same bytes in one pass (a section's CRC and the
// whole file's): the CPU overlaps the two chains, so this costs about as much
// as one Crc32cExtend.
void Crc32cExtendTwo(uint32_t* first, uint32_t* second, const void* data, size_t n);

}  // namespace spotps

#endif  // SPOTPS_COMMON_CRC32C_H_
