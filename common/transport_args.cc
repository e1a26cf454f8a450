#include "common/transport_args.h"

#include <grpc/grpc.h>
#include <malloc.h>

namespace spotps {

std::vector<std::pair<std::string, int>> BulkTransportArgs() {
  std::vector<std::pair<std::string, int>> args = {
      // Big frames and a big flow-control window: a 4 MiB chunk should not
      // need dozens of WINDOW_UPDATE round trips.
      {GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 * 1024 * 1024 - 1},
      {GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 * 1024 * 1024},
      {GRPC_ARG_HTTP2_BDP_PROBE, 0},
      {GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, 16 * 1024 * 1024},
      {GRPC_ARG_TCP_READ_CHUNK_SIZE, 4 * 1024 * 1024},
      {GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 1024 * 1024},
      {GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 16 * 1024 * 1024},
  };
  return args;
}

void TuneAllocatorForBulkTransfers() {
  // 32 MiB is the largest threshold glibc accepts on 64-bit.
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
}

}  // namespace spotps
