// RegionTable: registration and range checks (overlapping registrations are allowed).
#include "region_table.h"

#include <mutex>

namespace kvstore {

void RegionTable::Register(uint64_t address, uint64_t size) {
  std::unique_lock<std::shared_mutex> lk(mu_);
  regions_[address] = size;
}

bool RegionTable::Unregister(uint64_t address) {
  std::unique_lock<std::shared_mutex> lk(mu_);
  return regions_.erase(address) > 0;
}

bool RegionTable::ContainsLocked(uint64_t address, uint64_t length) const {
  const uint64_t end = address + length;
  if (end < address) return false;  // wraps
  auto it = regions_.upper_bound(address);
  // Walk back over every region starting at or before `address` (few regions; overlaps allowed).
  while (it != regions_.begin()) {
    --it;
    if (end <= it->first + it->second) return true;
  }
  return false;
}

size_t RegionTable::Count() const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  return regions_.size();
}

}  // namespace kvstore
