// RegionTable: registration and range checks (overlapping registrations are allowed).
#include "region_table.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>

#include "shareable_registry.h"

namespace kvstore {

namespace {
class WriteLock {
 public:
  explicit WriteLock(pthread_rwlock_t* l) : l_(l) { pthread_rwlock_wrlock(l_); }
  ~WriteLock() { pthread_rwlock_unlock(l_); }

 private:
  pthread_rwlock_t* l_;
};
}  // namespace

RegionTable::RegionTable() {
  pthread_rwlockattr_t attr;
  pthread_rwlockattr_init(&attr);
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&lock_, &attr);
  pthread_rwlockattr_destroy(&attr);
  gen_ = &gen_fallback_;
  UniqueFd fd(::memfd_create("kvstore-region-generation", MFD_CLOEXEC));
  if (fd.valid() && ::ftruncate(fd.get(), 4096) == 0) {
    void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p != MAP_FAILED) {
      gen_ = new (p) std::atomic<uint64_t>(0);
      gen_fd_ = std::move(fd);
    }
  }
}

RegionTable::~RegionTable() {
  if (gen_ != &gen_fallback_) ::munmap(gen_, 4096);
  pthread_rwlock_destroy(&lock_);
}

void RegionTable::Register(uint64_t address, uint64_t size) {
  ShareableMapping m;
  const bool shareable = LookupShareable(address, size, &m);
  WriteLock lk(&lock_);
  regions_[address] = size;
  if (shareable) unshared_.erase(address);
  else unshared_.insert(address);
}

bool RegionTable::Unregister(uint64_t address) {
  WriteLock lk(&lock_);
  const bool erased = regions_.erase(address) > 0;
  // Only fd-backed memory is ever granted to a peer: dropping anything else (a Get's result
  // buffer registered for one read) must not revoke every peer's grants.
  const bool was_unshared = unshared_.erase(address) > 0;
  if (erased && !was_unshared) gen_->fetch_add(1, std::memory_order_acq_rel);
  return erased;
}

bool RegionTable::ContainsLocked(uint64_t address, uint64_t length) const {
  uint64_t start, size;
  return FindLocked(address, length, &start, &size);
}

bool RegionTable::FindLocked(uint64_t address, uint64_t length, uint64_t* start, uint64_t* size) const {
  const uint64_t end = address + length;
  if (end < address) return false;  // wraps
  auto it = regions_.upper_bound(address);
  // Walk back over every region starting at or before `address` (few regions; overlaps allowed).
  while (it != regions_.begin()) {
    --it;
    if (end <= it->first + it->second) {
      *start = it->first;
      *size = it->second;
      return true;
    }
  }
  return false;
}

}  // namespace kvstore
