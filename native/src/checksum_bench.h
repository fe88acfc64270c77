// Benchmark loops for the CRC-32C primitives (npm run bench:checksum): memcpy, Crc32c, memcpy
// followed by Crc32c, and CopyCrc32c over the same buffers. Not used by the data path.
#pragma once
#include <cstddef>
#include <cstdint>

#include "crc32c.h"

namespace kvstore {

// Elapsed seconds of each loop for `iterations` operations of `size` bytes.
struct ChecksumBenchTimes {
  double memcpy_s;
  double crc32c_s;
  double separate_s;  // memcpy, then Crc32c of the destination
  double fused_s;     // CopyCrc32c
};

// Cycles over `span` bytes of source and of destination (slot i % (span / size)), so that a span
// far above the last-level cache makes every operation touch cold memory; span <= size reuses
// one pair of buffers (hot once they fit the caches). Throws NativeError when the buffers cannot
// be mapped.
ChecksumBenchTimes ChecksumBenchRun(Crc32cImpl impl, size_t size, uint64_t iterations, size_t span);

}  // namespace kvstore
