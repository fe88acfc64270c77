// PagedFile (see paged_file.h).
#include "paged_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <string>

#include "shareable_registry.h"

namespace kvstore {

std::unique_ptr<PagedFile> FindPagedFile(uint64_t address, uint64_t length) {
  ShareableMapping m;
  if (!LookupShareable(address, length, &m)) return nullptr;
  struct stat st {};
  struct statfs fs {};
  if (::fstat(m.fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || ::fstatfs(m.fd.get(), &fs) != 0) return nullptr;
  if (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC) return nullptr;
  auto f = std::make_unique<PagedFile>();
  // A descriptor of its own (not a dup: that would share the mapping's read-ahead state and
  // flags with every process the mapping's fd was handed to), read at random: only the pages
  // asked for are read.
  const std::string self = "/proc/self/fd/" + std::to_string(m.fd.get());
  f->fd.reset(::open(self.c_str(), O_RDONLY | O_CLOEXEC));
  if (!f->fd.valid()) return nullptr;  // no /proc: served from the mapping as before
  ::posix_fadvise(f->fd.get(), 0, 0, POSIX_FADV_RANDOM);
  f->file_offset = m.file_offset + (address - m.map_base);
  f->file_end = f->file_offset + length;
  return f;
}

}  // namespace kvstore
