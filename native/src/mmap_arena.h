// Process-wide pre-reserved arena for anonymous mappings (MC_MMAP_ARENA_POOL_SIZE): one big
// MAP_NORESERVE reservation carved by a lock-free bump pointer. Space is never reused; a freed
// block only gives its physical pages back (MADV_DONTNEED).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace kvstore {

class MmapArena {
 public:
  // The first call fixes whether the arena exists and its size, for the life of the process.
  static MmapArena* Instance(bool enabled, size_t pool_size);
  // nullptr when the pool is exhausted.
  void* Allocate(size_t len);
  size_t pool_size() const { return pool_size_; }
  size_t used() const { return next_.load(std::memory_order_relaxed); }
  bool enabled() const { return base_ != nullptr; }

  struct Stats { bool decided; bool enabled; size_t pool_size; size_t used; uint64_t fallbacks; };
  static Stats GetStats();
  static void CountFallback();

 private:
  MmapArena(bool enabled, size_t pool_size);
  char* base_ = nullptr;
  size_t pool_size_ = 0;
  std::atomic<size_t> next_{0};
};

}  // namespace kvstore
