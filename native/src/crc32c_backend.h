// The interface every CRC-32C backend implements (one file per backend: crc32c_portable.cc,
// crc32c_sse42.cc, crc32c_avx512.cc). These work on the raw CRC register: crc32c.cc adds the pre/post inversion.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvstore::crc32c_backend {

// Hardware copies of at least this many bytes use streaming (non-temporal) stores: a copy that
// large (source + destination past half of a 2 MiB L2) is mostly cache-cold on the store's data
// path, and streaming stores skip reading each destination line before writing it (measured: a
// 64 MiB cold fused copy runs at about 1.45x memcpy with them, 0.95x without; a cache-hot 1 MiB
// copy loses about a third).
constexpr size_t kNonTemporalMinBytes = size_t(1) << 20;

// Register after feeding `n` bytes at `src`; the Copy form also copies them to `dst`.
uint32_t PortableUpdate(uint32_t reg, const uint8_t* src, size_t n);
uint32_t PortableCopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n);

// False on CPUs without SSE4.2 + PCLMULQDQ and on non-x86 builds (whose Sse42* then run the
// portable code).
bool Sse42Supported();
uint32_t Sse42Update(uint32_t reg, const uint8_t* src, size_t n);
uint32_t Sse42CopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n);

// False unless the CPU has AVX-512 (F, VL, BW) and VPCLMULQDQ and this is an x86-64 build.
bool Avx512Supported();
uint32_t Avx512Update(uint32_t reg, const uint8_t* src, size_t n);
uint32_t Avx512CopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n);

}  // namespace kvstore::crc32c_backend
