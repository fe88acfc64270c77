// The interface every CRC-32C backend implements (one file per backend: crc32c_portable.cc,
// crc32c_sse42.cc, crc32c_avx512.cc, crc32c_arm64.cc). These work on the raw CRC register:
// crc32c.cc adds the pre/post inversion.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvstore::crc32c_backend {

// Register after feeding `n` bytes at `src`; the Copy form also copies them to `dst`, with
// streaming (non-temporal) stores when `stream` (crc32c.cc decides: CopyStores in crc32c.h).
// Why streaming from 2 MiB (kStreamingCopyMinBytes): source and destination together then exceed
// a 2 MiB L2, so the copy is not cache-resident anyway, and streaming stores skip reading each
// destination line before writing it. Measured (bench:checksum): a cold 4 MiB or 64 MiB fused
// copy runs at about 1.3x memcpy with them and 0.95x without; at 1 MiB, where both buffers fit in
// L2, they cost a cache-hot copy about a third (below memcpy + a separate checksum), so a 1 MiB
// copy on its own keeps ordinary stores.
uint32_t PortableUpdate(uint32_t reg, const uint8_t* src, size_t n);
uint32_t PortableCopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n, bool stream);

// False on CPUs without SSE4.2 + PCLMULQDQ and on non-x86 builds (whose Sse42* then run the
// portable code).
bool Sse42Supported();
uint32_t Sse42Update(uint32_t reg, const uint8_t* src, size_t n);
uint32_t Sse42CopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n, bool stream);

// False unless the CPU has AVX-512 (F, VL, BW) and VPCLMULQDQ and this is an x86-64 build.
bool Avx512Supported();
uint32_t Avx512Update(uint32_t reg, const uint8_t* src, size_t n);
uint32_t Avx512CopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n, bool stream);
// How Avx512CopyUpdate copies with ordinary stores in this process: "memcpy" (memcpy, then fold)
// or "vector" (one pass with vector stores); "none" in a build without the backend.
const char* Avx512PlainCopyName();

// False unless this is an aarch64 build on a CPU with the CRC extension.
bool Arm64Supported();
uint32_t Arm64Update(uint32_t reg, const uint8_t* src, size_t n);
uint32_t Arm64CopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n, bool stream);

}  // namespace kvstore::crc32c_backend
