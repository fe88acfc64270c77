// Named POSIX shared memory backend (shm_open, i.e. /dev/shm/<name>): the object the dummy
// client and the sidecar both map, so both see the same bytes.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "mapping.h"
#include "native_error.h"

namespace kvstore {

std::unique_ptr<Mapping> MapShm(const MapRequest& req) {
  std::string name = req.name;
  if (name.empty()) throw NativeError("INVALID_ARGUMENT", "mapMemory(kind 'shm'): name is required");
  if (name[0] != '/') name = "/" + name;
  if (name.size() < 2 || name.find('/', 1) != std::string::npos || name.size() > 255) {
    throw NativeError("INVALID_ARGUMENT", "mapMemory(kind 'shm'): name '" + req.name +
                                              "' must be '/x' or 'x' with no other '/' (at most 255 characters)");
  }
  if (req.hugepage) {
    throw NativeError("INVALID_ARGUMENT", "mapMemory(kind 'shm'): /dev/shm cannot hold huge pages; use kind 'hugetlbfs' with a path on a hugetlbfs mount");
  }
  int oflags = O_RDWR | O_CLOEXEC | (req.create ? O_CREAT : 0);
  UniqueFd fd(::shm_open(name.c_str(), oflags, 0600));
  if (!fd.valid()) {
    int err = errno;
    throw NativeError(err == ENOENT ? "NOT_FOUND" : "MAP_FAILED", ErrnoMessage("shm_open(" + name + ")", err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw NativeError("MAP_FAILED", ErrnoMessage("fstat(" + name + ")", errno));
  const uint64_t end = req.offset + req.size;
  if (static_cast<uint64_t>(st.st_size) < end) {
    if (!req.create) {
      throw NativeError("INVALID_ARGUMENT", "shm object " + name + " holds " + std::to_string(st.st_size) +
                                                " bytes, fewer than offset+size=" + std::to_string(end));
    }
    if (::ftruncate(fd.get(), static_cast<off_t>(end)) != 0) {
      throw NativeError("MAP_FAILED", ErrnoMessage("ftruncate(" + name + ")", errno));
    }
  }
  void* p = MmapShared(fd.get(), req.size, req.offset, false, 0, "mmap(" + name + ")");
  return std::make_unique<Mapping>(p, req.size, req.size, MemoryKind::kShm, std::move(fd), false, req.offset);
}

}  // namespace kvstore
