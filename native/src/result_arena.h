// Memory for Get results: one anonymous mapping, registered once with the transfer engine, from
// which each large result gets its own range. The engine reads straight into that range (no
// staging copy) and the user receives it as a Buffer; the range returns to the arena when the
// Buffer's ArrayBuffer is garbage collected. The mapping lives until the arena and every range
// handed out are gone, so a Buffer never points at unmapped or reused memory.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

namespace kvstore {

class ResultArena {
 public:
  // Maps `size` bytes (rounded up to 4 KiB, MAP_NORESERVE) and faults them in on a background
  // thread, so the arena is resident (RSS = size). Pages are kept for reuse. Throws NativeError
  // MAP_FAILED.
  explicit ResultArena(size_t size);
  ~ResultArena();
  ResultArena(const ResultArena&) = delete;
  ResultArena& operator=(const ResultArena&) = delete;

  char* base() const { return base_; }
  size_t size() const { return size_; }
  // First fit over the free ranges, 4 KiB aligned; nullptr when no free range is large enough
  // or the arena is closed.
  char* Take(size_t len);
  // No more takes; the physical pages of free ranges (and of ranges given back later) go back to
  // the kernel. The mapping itself stays until the last result is gone. Idempotent.
  void Close();
  // Returns a range from Take (thread-safe, no allocation of JS objects; unknown pointers are ignored).
  void Give(char* p);

  // The results are invisible to V8's external-memory count (see addon_result_arena.cc) while at
  // most half the arena is in use; beyond that each result is counted like any Buffer (the
  // caller reports +len), so V8 collects dropped results before the arena runs out. Whether the
  // result just taken must be counted.
  bool CountOnTake() const;
  // A counted result died (inside GC, where V8 must not be called): remember its bytes.
  void Uncount(size_t len) { uncounted_.fetch_add(len, std::memory_order_relaxed); }
  // Bytes to withdraw from V8's count now (JS thread), reset to 0.
  size_t TakeUncounted() { return uncounted_.exchange(0, std::memory_order_relaxed); }

  struct Stats { size_t used; size_t ranges; size_t largest_free; uint64_t refusals; };
  Stats GetStats() const;

 private:
  char* base_ = nullptr;
  size_t size_ = 0;
  mutable std::mutex mu_;
  std::map<size_t, size_t> free_;  // offset -> length, no two adjacent
  std::map<size_t, size_t> used_;  // offset -> length
  size_t used_bytes_ = 0;
  uint64_t refusals_ = 0;
  std::atomic<size_t> uncounted_{0};
  std::atomic<bool> stop_{false};
  bool closed_ = false;
  std::thread prefault_;
};

}  // namespace kvstore
