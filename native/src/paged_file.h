// The file behind a served region whose pages may be out of memory: a regular file on a file
// system with a backing store (an SSD offload file, a CXL stand-in file), not memfd, POSIX shm
// (tmpfs), ramfs or hugetlbfs, whose pages leave memory only to swap. The TCP serving side sends
// READs of such a region from the file with sendfile() instead of from the mapping
// (tcp_server.cc says why).
#pragma once
#include <cstdint>
#include <memory>

#include "sequential_read_ahead.h"
#include "unique_fd.h"

namespace kvstore {

struct PagedFile {
  UniqueFd fd;               // the file opened again, read-only, POSIX_FADV_RANDOM
  uint64_t file_offset = 0;  // where in the file the region's first byte is
  uint64_t file_end = 0;     // where in the file the region's last byte ends
  mutable SequentialReadAhead ahead;  // READs of neighbouring ranges (tcp_server.cc)
};

// The paged file behind [address, +length) when it lies in a file-backed mapping of that kind;
// nullptr otherwise (memory, shm, hugetlbfs, a DAX device, anonymous memory, Buffers).
std::unique_ptr<PagedFile> FindPagedFile(uint64_t address, uint64_t length);

}  // namespace kvstore
