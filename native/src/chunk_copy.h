// The copy of the memcpy paths (shm mappings, memcpyLocal, inline batches and reads): a plain
// memcpy, or, when the op asked for its checksum, the copy fused with the CRC-32C of the bytes it
// moves (one pass over them; CopyCrc32c is as fast as memcpy from 64 KiB up, docs/native.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "crc32c.h"

namespace kvstore {

// dst and src must not overlap. crc: where the CRC of the bytes goes (nullptr: none wanted).
inline void CopyChunk(void* dst, const void* src, size_t len, uint32_t* crc) {
  if (crc) *crc = CopyCrc32c(0, dst, src, len);
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
