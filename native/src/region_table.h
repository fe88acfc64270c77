// The registered memory regions of one engine: the only ranges a remote peer (or a local
// transfer) may touch. Readers hold the shared lock while bytes move, so an unregister waits
// for in-flight chunks instead of letting them touch unmapped memory.
#pragma once
#include <cstdint>
#include <map>
#include <shared_mutex>

namespace kvstore {

class RegionTable {
 public:
  void Register(uint64_t address, uint64_t size);
  bool Unregister(uint64_t address);
  // Caller holds Lock() (shared). True when [address, address+length) lies inside one region.
  bool ContainsLocked(uint64_t address, uint64_t length) const;
  std::shared_lock<std::shared_mutex> Lock() const { return std::shared_lock<std::shared_mutex>(mu_); }
  size_t Count() const;

 private:
  mutable std::shared_mutex mu_;
  std::map<uint64_t, uint64_t> regions_;  // start -> size
};

}  // namespace kvstore
