// OpChecksums (see op_checksums.h).
#include "op_checksums.h"

#include <algorithm>

#include "crc32c.h"

namespace kvstore {

void OpChecksums::Finish() {
  for (OpEntry& e : ops_) {
    const size_t n = e.first == kNone ? 0 : Pieces(e.length);
    if (n == 0) continue;  // did not ask, or empty: 0 (the CRC-32C of no bytes is 0)
    uint32_t crc = slots_[e.first];
    for (size_t k = 1; k < n; ++k) {
      const uint64_t len = std::min<uint64_t>(piece_, e.length - k * piece_);
      crc = Crc32cCombine(crc, slots_[e.first + k], len);
    }
    e.crc = crc;
  }
}

}  // namespace kvstore
