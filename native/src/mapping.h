// Memory mappings handed to JS: a RAII `Mapping` (munmap + fd close, idempotent) and the
// request describing which backend to map it from (memfd, POSIX shm, hugetlbfs, file, anonymous).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "unique_fd.h"

namespace kvstore {

enum class MemoryKind { kMemfd, kShm, kHugetlbfs, kFile, kAnonymous };

const char* MemoryKindName(MemoryKind kind);
bool ParseMemoryKind(const std::string& s, MemoryKind* out);

struct MapRequest {
  MemoryKind kind = MemoryKind::kMemfd;
  size_t size = 0;
  std::string name;       // shm object name
  std::string path;       // file / hugetlbfs path
  bool create = false;
  uint64_t offset = 0;
  bool hugepage = false;
  size_t hugepage_size = 2u << 20;  // 2 MiB or 1 GiB
  // Anonymous allocations only: arena settings fixed at the first anonymous allocation.
  bool arena_enabled = false;
  size_t arena_pool_size = 0;
};

class Mapping {
 public:
  // Takes ownership of [addr, addr+map_len) (munmap on Unmap) unless `arena_block` (then the
  // pages are only given back with MADV_DONTNEED: a bump arena never reuses space).
  // Fd-backed mappings are also entered in the shareable registry (same-host shm transport).
  Mapping(void* addr, size_t map_len, size_t size, MemoryKind kind, UniqueFd fd, bool arena_block,
          uint64_t file_offset = 0);
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  void* data() const { return addr_; }
  size_t size() const { return size_; }
  MemoryKind kind() const { return kind_; }
  int fd() const { return fd_.get(); }
  bool unmapped() const { return unmapped_.load(); }
  // Idempotent, thread-safe.
  void Unmap();

 private:
  void* addr_;
  size_t map_len_;
  size_t size_;
  MemoryKind kind_;
  UniqueFd fd_;
  bool arena_block_;
  std::atomic<bool> unmapped_{false};
};

// Throws NativeError (INVALID_ARGUMENT, HUGEPAGE_UNAVAILABLE, MAP_FAILED, NOT_FOUND).
std::unique_ptr<Mapping> MapMemory(const MapRequest& req);

// Backends, one file each.
std::unique_ptr<Mapping> MapMemfd(const MapRequest& req);
std::unique_ptr<Mapping> MapShm(const MapRequest& req);
std::unique_ptr<Mapping> MapFile(const MapRequest& req);       // also hugetlbfs
std::unique_ptr<Mapping> MapAnonymous(const MapRequest& req);  // arena or per-call mmap

// Shared by backends.
size_t RoundUp(size_t v, size_t align);
int HugeFlagBits(size_t hugepage_size);  // MAP_HUGE_2MB / MAP_HUGE_1GB (also valid for MFD_HUGE_*)
[[noreturn]] void ThrowHugepageUnavailable(size_t bytes, size_t hugepage_size, const std::string& what, int err);
void* MmapShared(int fd, size_t len, uint64_t offset, bool hugepage, size_t hugepage_size, const std::string& what);

}  // namespace kvstore
