// Process-wide index of live fd-backed mappings (memfd, shm, file, hugetlbfs), so the engine can
// hand a same-host peer the fd behind a registered address (shm transport).
#pragma once
#include <cstddef>
#include <cstdint>

#include "unique_fd.h"

namespace kvstore {

struct ShareableMapping {
  UniqueFd fd;             // a dup, owned by the caller
  uint64_t map_base = 0;   // address of the mapping in this process
  uint64_t map_len = 0;
  uint64_t file_offset = 0;
};

void RegisterShareable(const void* base, size_t len, int fd, uint64_t file_offset);
void UnregisterShareable(const void* base);
// The mapping containing [address, address+length); false when none (anonymous memory, Buffers).
bool LookupShareable(uint64_t address, uint64_t length, ShareableMapping* out);

}  // namespace kvstore
