// OpChecksums (see op_checksums.h).
#include "op_checksums.h"

#include <algorithm>

#include "crc32c.h"

namespace kvstore {

void OpChecksums::Finish() {
  result_.assign(first_.size(), 0);
  for (size_t i = 0; i < first_.size(); ++i) {
    if (first_[i] == kNone) continue;
    const size_t n = Pieces(length_[i]);
    if (n == 0) continue;
    uint32_t crc = slots_[first_[i]];
    for (size_t k = 1; k < n; ++k) {
      const uint64_t len = std::min<uint64_t>(piece_, length_[i] - k * piece_);
      crc = Crc32cCombine(crc, slots_[first_[i] + k], len);
    }
    result_[i] = crc;
  }
}

}  // namespace kvstore
