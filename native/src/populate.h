// Pre-faulting a mapping before it is served: every page backed now, by several threads, so a
// store pod is ready in seconds instead of being killed by its probe while JS touches pages one
// 4 KiB fault at a time (about 6 s per GiB measured before), and a machine without the memory
// fails at startup instead of under a peer's write.
#pragma once
#include <cstddef>
#include <string>

namespace kvstore {

struct PopulateResult {
  std::string method;  // "madvise" (MADV_POPULATE_WRITE, Linux 5.14+) or "touch" (one write per page)
  unsigned threads = 0;
  int error = 0;  // errno of the first failure (ENOMEM: the machine cannot back the range), 0 if none
};

// Backs [base, base+length) with memory for writing, keeping its contents. Blocking: run it off the
// JS thread. `threads` 0 picks one per core (at most 8).
PopulateResult Populate(char* base, size_t length, unsigned threads);

}  // namespace kvstore
