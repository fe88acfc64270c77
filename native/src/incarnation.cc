// NewIncarnation (see incarnation.h).
#include "incarnation.h"

#include <sys/random.h>

#include <cerrno>

#include "native_error.h"

namespace kvstore {

uint64_t NewIncarnation() {
  for (;;) {
    uint64_t v = 0;
    const ssize_t n = ::getrandom(&v, sizeof v, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof v)) throw NativeError("INTERNAL", ErrnoMessage("getrandom for a region incarnation", errno));
    v &= (uint64_t{1} << 53) - 1;
    if (v != 0) return v;
  }
}

}  // namespace kvstore
