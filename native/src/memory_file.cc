// File backends: any file or DAX character device (kind 'file', for CXL memory) and a file on
// a hugetlbfs mount (kind 'hugetlbfs', whose pages are huge pages reserved at mmap time).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>

#include "mapping.h"
#include "native_error.h"

namespace kvstore {

namespace {
constexpr long kHugetlbfsMagic = 0x958458f6;

size_t HugetlbfsPageSize(const struct statfs& fs) { return static_cast<size_t>(fs.f_bsize); }
}  // namespace

std::unique_ptr<Mapping> MapFile(const MapRequest& req) {
  const bool huge = req.kind == MemoryKind::kHugetlbfs;
  const char* kind = huge ? "hugetlbfs" : "file";
  if (req.path.empty()) throw NativeError("INVALID_ARGUMENT", std::string("mapMemory(kind '") + kind + "'): path is required");
  int oflags = O_RDWR | O_CLOEXEC | (req.create ? O_CREAT : 0);
  UniqueFd fd(::open(req.path.c_str(), oflags, 0600));
  if (!fd.valid()) {
    int err = errno;
    throw NativeError(err == ENOENT ? "NOT_FOUND" : "MAP_FAILED", ErrnoMessage("open(" + req.path + ")", err));
  }
  size_t page = 4096;
  if (huge) {
    struct statfs fs {};
    if (::fstatfs(fd.get(), &fs) != 0) throw NativeError("MAP_FAILED", ErrnoMessage("fstatfs(" + req.path + ")", errno));
    if (fs.f_type != kHugetlbfsMagic) {
      throw NativeError("INVALID_ARGUMENT", "mapMemory(kind 'hugetlbfs'): " + req.path +
                                                " is not on a hugetlbfs mount (mount one with `mount -t hugetlbfs none /mnt/huge`)");
    }
    page = HugetlbfsPageSize(fs);
    if (req.offset % page != 0) {
      throw NativeError("INVALID_ARGUMENT", "mapMemory(kind 'hugetlbfs'): offset must be a multiple of the huge page size " + std::to_string(page));
    }
  }
  const size_t len = RoundUp(req.size, page);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw NativeError("MAP_FAILED", ErrnoMessage("fstat(" + req.path + ")", errno));
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) < req.offset + len) {
    if (!req.create && !huge) {
      throw NativeError("INVALID_ARGUMENT", "file " + req.path + " holds " + std::to_string(st.st_size) +
                                                " bytes, fewer than offset+size=" + std::to_string(req.offset + req.size) +
                                                " (pass create: true to extend it)");
    }
    if (::ftruncate(fd.get(), static_cast<off_t>(req.offset + len)) != 0) {
      int err = errno;
      if (huge) ThrowHugepageUnavailable(len, page, "ftruncate(" + req.path + ")", err);
      throw NativeError("MAP_FAILED", ErrnoMessage("ftruncate(" + req.path + ")", err));
    }
  }
  void* p = MmapShared(fd.get(), len, req.offset, huge, page, "mmap(" + req.path + ")");
  return std::make_unique<Mapping>(p, len, req.size, huge ? MemoryKind::kHugetlbfs : MemoryKind::kFile, std::move(fd), false,
                                   req.offset);
}

}  // namespace kvstore
