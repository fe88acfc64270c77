// Mapping lifetime (munmap once) and the dispatch from a MapRequest to its backend, plus the
// helpers every backend shares (rounding, huge-page flags, the huge-page error text).
#include "mapping.h"

#include <string.h>
#include <sys/mman.h>

#include <cerrno>

#include "native_error.h"
#include "shareable_registry.h"

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

namespace kvstore {

std::string ErrnoMessage(const std::string& what, int err) {
  const char* name = strerrorname_np(err);
  return what + ": " + strerror(err) + " (" + (name ? name : "errno " + std::to_string(err)) + ")";
}

const char* MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kMemfd: return "memfd";
    case MemoryKind::kShm: return "shm";
    case MemoryKind::kHugetlbfs: return "hugetlbfs";
    case MemoryKind::kFile: return "file";
    case MemoryKind::kAnonymous: return "anonymous";
  }
  return "unknown";
}

bool ParseMemoryKind(const std::string& s, MemoryKind* out) {
  if (s == "memfd") *out = MemoryKind::kMemfd;
  else if (s == "shm") *out = MemoryKind::kShm;
  else if (s == "hugetlbfs") *out = MemoryKind::kHugetlbfs;
  else if (s == "file") *out = MemoryKind::kFile;
  else if (s == "anonymous") *out = MemoryKind::kAnonymous;
  else return false;
  return true;
}

Mapping::Mapping(void* addr, size_t map_len, size_t size, MemoryKind kind, UniqueFd fd, bool arena_block,
                 uint64_t file_offset)
    : addr_(addr), map_len_(map_len), size_(size), kind_(kind), fd_(std::move(fd)), arena_block_(arena_block) {
  if (fd_.valid()) RegisterShareable(addr_, map_len_, fd_.get(), file_offset);
}

Mapping::~Mapping() { Unmap(); }

void Mapping::Unmap() {
  if (unmapped_.exchange(true)) return;
  if (fd_.valid()) UnregisterShareable(addr_);
  if (arena_block_) {
    ::madvise(addr_, map_len_, MADV_DONTNEED);
  } else {
    ::munmap(addr_, map_len_);
  }
  fd_.reset();
}

size_t RoundUp(size_t v, size_t align) { return (v + align - 1) / align * align; }

int HugeFlagBits(size_t hugepage_size) {
  int log2 = 0;
  while ((size_t{1} << log2) < hugepage_size) ++log2;
  return log2 << MAP_HUGE_SHIFT;
}

void ThrowHugepageUnavailable(size_t bytes, size_t hugepage_size, const std::string& what, int err) {
  const std::string page = hugepage_size >= (1u << 30) ? "1GB" : "2MB";
  const size_t pages = RoundUp(bytes, hugepage_size) / hugepage_size;
  const std::string sysfs = hugepage_size >= (1u << 30)
      ? "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
      : "/proc/sys/vm/nr_hugepages";
  throw NativeError(
      "HUGEPAGE_UNAVAILABLE",
      "huge pages unavailable: " + ErrnoMessage(what, err) + "; needed " + std::to_string(pages) + " free " + page +
          " page(s) for " + std::to_string(bytes) +
          " bytes. Huge-page memory was requested (MC_STORE_USE_HUGEPAGE=1, MC_STORE_HUGEPAGE_SIZE=" + page +
          ", or hugepage: true). Reserve pages with `echo " + std::to_string(pages) + " > " + sysfs +
          "` (as root), or mount hugetlbfs (`mount -t hugetlbfs -o pagesize=" + page +
          " none /mnt/huge`) and map a file there, or unset MC_STORE_USE_HUGEPAGE. No fallback to normal pages.");
}

void* MmapShared(int fd, size_t len, uint64_t offset, bool hugepage, size_t hugepage_size, const std::string& what) {
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) {
    int err = errno;
    if (hugepage && (err == ENOMEM || err == EINVAL)) ThrowHugepageUnavailable(len, hugepage_size, what, err);
    throw NativeError("MAP_FAILED", ErrnoMessage(what, err));
  }
  return p;
}

std::unique_ptr<Mapping> MapMemory(const MapRequest& req) {
  if (req.size == 0) throw NativeError("INVALID_ARGUMENT", "mapMemory: size must be a positive number of bytes");
  if (req.hugepage && req.hugepage_size != (2u << 20) && req.hugepage_size != (1u << 30)) {
    throw NativeError("INVALID_ARGUMENT", "mapMemory: hugepageSize must be 2MB or 1GB");
  }
  if (req.offset % 4096 != 0) {
    throw NativeError("INVALID_ARGUMENT", "mapMemory: offset " + std::to_string(req.offset) + " is not a multiple of the 4096-byte page size");
  }
  switch (req.kind) {
    case MemoryKind::kMemfd: return MapMemfd(req);
    case MemoryKind::kShm: return MapShm(req);
    case MemoryKind::kHugetlbfs:
    case MemoryKind::kFile: return MapFile(req);
    case MemoryKind::kAnonymous: return MapAnonymous(req);
  }
  throw NativeError("INVALID_ARGUMENT", "mapMemory: unknown kind");
}

}  // namespace kvstore
