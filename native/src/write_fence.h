// The write fence of a served region, as pure logic: a WRITE whose placement generation is below
// `below` (generation 0 counts as below any positive `below`) or listed in `revoked` is refused.
// Fences only move forward: a lower `below` than the installed one is ignored, a new `revoked`
// list replaces the old one. A region with no fence (below 0, nothing revoked) refuses nothing.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace kvstore {

// The most revoked generations one fence may list (they must fit the shared fence page).
constexpr size_t kMaxRevokedGenerations = 1000;

struct WriteFence {
  uint64_t below = 0;
  std::vector<uint64_t> revoked;

  bool Refuses(uint64_t generation) const {
    if (generation < below) return true;
    return std::find(revoked.begin(), revoked.end(), generation) != revoked.end();
  }
  // The fence after installing `next` over this one.
  WriteFence Advanced(const WriteFence& next) const {
    WriteFence out;
    out.below = std::max(below, next.below);
    out.revoked = next.revoked;
    return out;
  }
};

}  // namespace kvstore
