// MmapArena and the 'anonymous' backend that uses it (per-call mmap when the arena is disabled,
// exhausted, or huge pages are requested).
#include "mmap_arena.h"

#include <sys/mman.h>

#include <cerrno>
#include <mutex>

#include "mapping.h"
#include "native_error.h"

namespace kvstore {

namespace {
constexpr size_t kArenaAlign = 4096;
std::once_flag g_once;
MmapArena* g_arena = nullptr;
std::atomic<bool> g_decided{false};
std::atomic<uint64_t> g_fallbacks{0};
}  // namespace

MmapArena::MmapArena(bool enabled, size_t pool_size) {
  if (!enabled || pool_size == 0) return;
  void* p = ::mmap(nullptr, pool_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw NativeError("MAP_FAILED", ErrnoMessage("mmap arena reservation of " + std::to_string(pool_size) +
                                                     " bytes (MC_MMAP_ARENA_POOL_SIZE)", errno));
  }
  base_ = static_cast<char*>(p);
  pool_size_ = pool_size;
}

MmapArena* MmapArena::Instance(bool enabled, size_t pool_size) {
  std::call_once(g_once, [&] {
    g_arena = new MmapArena(enabled, pool_size);  // lives for the process
    g_decided.store(true);
  });
  return g_arena;
}

void* MmapArena::Allocate(size_t len) {
  if (!base_) return nullptr;
  const size_t need = RoundUp(len, kArenaAlign);
  size_t cur = next_.load(std::memory_order_relaxed);
  do {
    if (cur + need > pool_size_ || cur + need < cur) return nullptr;
  } while (!next_.compare_exchange_weak(cur, cur + need, std::memory_order_relaxed));
  return base_ + cur;
}

MmapArena::Stats MmapArena::GetStats() {
  Stats s{g_decided.load(), false, 0, 0, g_fallbacks.load()};
  if (s.decided && g_arena) {
    s.enabled = g_arena->enabled();
    s.pool_size = g_arena->pool_size();
    s.used = g_arena->used();
  }
  return s;
}

void MmapArena::CountFallback() { g_fallbacks.fetch_add(1); }

std::unique_ptr<Mapping> MapAnonymous(const MapRequest& req) {
  if (req.hugepage) {
    const size_t len = RoundUp(req.size, req.hugepage_size);
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | HugeFlagBits(req.hugepage_size), -1, 0);
    if (p == MAP_FAILED) ThrowHugepageUnavailable(req.size, req.hugepage_size, "mmap(MAP_HUGETLB)", errno);
    return std::make_unique<Mapping>(p, len, req.size, MemoryKind::kAnonymous, UniqueFd(), false);
  }
  const size_t len = RoundUp(req.size, 4096);
  MmapArena* arena = MmapArena::Instance(req.arena_enabled, req.arena_pool_size);
  if (arena->enabled()) {
    if (void* p = arena->Allocate(len)) {
      return std::make_unique<Mapping>(p, len, req.size, MemoryKind::kAnonymous, UniqueFd(), true);
    }
    MmapArena::CountFallback();
  }
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw NativeError("MAP_FAILED", ErrnoMessage("mmap(anonymous, " + std::to_string(len) + ")", errno));
  return std::make_unique<Mapping>(p, len, req.size, MemoryKind::kAnonymous, UniqueFd(), false);
}

}  // namespace kvstore
