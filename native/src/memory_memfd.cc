// memfd backend: an anonymous file (optionally MFD_HUGETLB) whose fd can be shared with other
// processes (passed over a Unix socket or opened through /proc/<pid>/fd/<fd>).
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "mapping.h"
#include "native_error.h"

namespace kvstore {

std::unique_ptr<Mapping> MapMemfd(const MapRequest& req) {
  unsigned flags = MFD_CLOEXEC;
  size_t len = RoundUp(req.size, 4096);
  if (req.hugepage) {
    flags |= MFD_HUGETLB | static_cast<unsigned>(HugeFlagBits(req.hugepage_size));
    len = RoundUp(req.size, req.hugepage_size);
  }
  const std::string name = req.name.empty() ? "kvstore-segment" : req.name;
  UniqueFd fd(::memfd_create(name.c_str(), flags));
  if (!fd.valid()) {
    int err = errno;
    if (req.hugepage) ThrowHugepageUnavailable(req.size, req.hugepage_size, "memfd_create(MFD_HUGETLB)", err);
    throw NativeError("MAP_FAILED", ErrnoMessage("memfd_create", err));
  }
  if (::ftruncate(fd.get(), static_cast<off_t>(len)) != 0) {
    int err = errno;
    if (req.hugepage) ThrowHugepageUnavailable(req.size, req.hugepage_size, "ftruncate(memfd)", err);
    throw NativeError("MAP_FAILED", ErrnoMessage("ftruncate(memfd, " + std::to_string(len) + ")", err));
  }
  void* p = MmapShared(fd.get(), len, 0, req.hugepage, req.hugepage_size, "mmap(memfd)");
  return std::make_unique<Mapping>(p, len, req.size, MemoryKind::kMemfd, std::move(fd), false);
}

}  // namespace kvstore
