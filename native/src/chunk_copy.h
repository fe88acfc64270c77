// The copy of the memcpy paths (shm mappings, memcpyLocal, inline batches and reads): a plain
// memcpy, or, when the op asked for its checksum, the copy fused with the CRC-32C of the bytes it
// moves (one pass over them; CopyCrc32c is as fast as memcpy from 64 KiB up, docs/native.md).
// The chunks of a large WRITE are copied with streaming stores (crc32c.h CopyStores,
// stream_copy.h): its destination is a segment, which this process does not read back and which
// is rarely in any cache (a Put lands in newly placed space). A READ's destination is the caller's
// buffer, read next and often cache-resident, and so may be its source (an object read again):
// its chunks keep ordinary stores, as separate copies (docs/native.md "Large ops").
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "crc32c.h"
#include "stream_copy.h"
#include "wire.h"

namespace kvstore {

// Measured over shm into cold memory (docs/native.md "Large ops"): a 1 MiB WRITE 60-64 -> 45 us,
// 256 KiB 25-30 -> 22-24 us; at 128 KiB the same either way.
constexpr uint64_t kStreamedWriteMinBytes = 256 * 1024;

// Whether the chunks of an op (WireOp) of `length` bytes are copied with streaming stores.
inline bool StreamedOp(uint16_t op, uint64_t length) { return op == static_cast<uint16_t>(WireOp::kWrite) && length >= kStreamedWriteMinBytes; }

// dst and src must not overlap. crc: where the CRC of the bytes goes (nullptr: none wanted).
// stream: the chunk is part of a streamed op (StreamedOp).
inline void CopyChunk(void* dst, const void* src, size_t len, uint32_t* crc, bool stream = false) {
  if (crc) *crc = CopyCrc32c(0, dst, src, len, stream ? CopyStores::kStreaming : CopyStores::kAuto);
  else if (stream) CopyStreaming(dst, src, len);
  else std::memcpy(dst, src, len);
}

// As CopyChunk, for ranges that may overlap (memmove); the CRC is of the source bytes as they were
// before the move.
inline void MoveChunk(void* dst, const void* src, size_t len, uint32_t* crc) {
  if (!crc) {
    std::memmove(dst, src, len);
    return;
  }
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  if (d + len <= s || s + len <= d) {
    *crc = CopyCrc32c(0, dst, src, len);
  } else {
    *crc = Crc32c(0, src, len);
    std::memmove(dst, src, len);
  }
}

}  // namespace kvstore
