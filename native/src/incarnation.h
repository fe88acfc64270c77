// Incarnations: the random identity of one region registration. A request that names the
// incarnation it expects is refused (STALE) by a region registered since, even at the same
// address in a restarted process.
#pragma once
#include <cstdint>

namespace kvstore {

// A random non-zero integer below 2^53 (exact as a JS number) from getrandom(2). Throws
// NativeError INTERNAL when the kernel gives no randomness.
uint64_t NewIncarnation();

}  // namespace kvstore
