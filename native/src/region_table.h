// The registered memory regions of one engine: the only ranges a remote peer (or a local
// transfer) may touch. Readers hold the shared lock while bytes move, so an unregister waits
// for in-flight chunks instead of letting them touch unmapped memory. The lock prefers
// writers, so an unregister is not starved by a steady stream of transfers.
#pragma once
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <set>

#include "unique_fd.h"

namespace kvstore {

class RegionTable {
 public:
  class SharedLock {
   public:
    explicit SharedLock(pthread_rwlock_t* l) : l_(l) { pthread_rwlock_rdlock(l_); }
    ~SharedLock() { pthread_rwlock_unlock(l_); }
    SharedLock(const SharedLock&) = delete;
    SharedLock& operator=(const SharedLock&) = delete;

   private:
    pthread_rwlock_t* l_;
  };

  RegionTable();
  ~RegionTable();
  RegionTable(const RegionTable&) = delete;
  RegionTable& operator=(const RegionTable&) = delete;

  void Register(uint64_t address, uint64_t size);
  bool Unregister(uint64_t address);
  // Caller holds Lock(). True when [address, address+length) lies inside one region.
  bool ContainsLocked(uint64_t address, uint64_t length) const;
  // Caller holds Lock(). The region containing the range, if any.
  bool FindLocked(uint64_t address, uint64_t length, uint64_t* start, uint64_t* size) const;
  SharedLock Lock() const { return SharedLock(&lock_); }

  // A shared page holding a counter bumped by every Unregister of an fd-backed region (the only
  // kind ever granted): same-host peers that were handed
  // fds map it and drop their grants when it moves (revocation). fd -1 if it could not be made.
  int generation_fd() const { return gen_fd_.get(); }
  uint64_t generation() const { return gen_->load(std::memory_order_acquire); }

 private:
  UniqueFd gen_fd_;
  std::atomic<uint64_t>* gen_ = nullptr;
  std::atomic<uint64_t> gen_fallback_{0};
  mutable pthread_rwlock_t lock_;
  std::map<uint64_t, uint64_t> regions_;  // start -> size
  std::set<uint64_t> unshared_;            // starts of regions that were not fd-backed when registered
};

}  // namespace kvstore
