// memcpy with streaming (non-temporal) stores, for the pieces of a large copy whose destination
// will not be read back from this core's cache soon (the chunks of a multi-MiB transfer: a Put's
// bytes land in another process's segment). Streaming stores skip reading each destination line
// before writing it and leave the caches to the caller's working set.
// Why our own loop: glibc's memcpy switches to streaming stores only above a threshold derived from
// the last-level cache size (tens of MiB and more), never for the 1 MiB chunks of a transfer.
// Measured on this machine's AMD EPYC (scratch loop, 1 MiB pieces of a 512 MiB ring, GB/s):
// warm source to a cold destination 25 (memcpy) -> 39-42 (SSE2 streaming; AVX2 and AVX-512
// stores are no faster), cold to cold 18 -> 22-26, cold source to a warm destination 24 -> 24-26,
// warm to warm 59 -> 42 (why it is for pieces of large copies only).
#pragma once
#include <cstddef>

namespace kvstore {

// dst and src must not overlap. On other than x86-64: memcpy.
void CopyStreaming(void* dst, const void* src, size_t len);

}  // namespace kvstore
