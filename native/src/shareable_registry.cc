// Shareable mapping registry (see shareable_registry.h).
#include "shareable_registry.h"

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <mutex>

namespace kvstore {

namespace {
struct Entry {
  uint64_t len;
  int fd;  // borrowed from the Mapping, valid until UnregisterShareable
  uint64_t file_offset;
};
std::mutex g_mu;
std::map<uint64_t, Entry>& Table() {
  static auto* t = new std::map<uint64_t, Entry>();  // never destroyed: used by finalizers at exit
  return *t;
}
}  // namespace

void RegisterShareable(const void* base, size_t len, int fd, uint64_t file_offset) {
  std::lock_guard<std::mutex> lk(g_mu);
  Table()[reinterpret_cast<uintptr_t>(base)] = Entry{len, fd, file_offset};
}

void UnregisterShareable(const void* base) {
  std::lock_guard<std::mutex> lk(g_mu);
  Table().erase(reinterpret_cast<uintptr_t>(base));
}

bool LookupShareable(uint64_t address, uint64_t length, ShareableMapping* out) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto& t = Table();
  auto it = t.upper_bound(address);
  if (it == t.begin()) return false;
  --it;
  if (address + length > it->first + it->second.len || address + length < address) return false;
  int dup = ::fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return false;
  out->fd.reset(dup);
  out->map_base = it->first;
  out->map_len = it->second.len;
  out->file_offset = it->second.file_offset;
  return true;
}

}  // namespace kvstore
