// The interface every CRC-32C backend implements (one file per backend: crc32c_portable.cc,
// crc32c_sse42.cc, crc32c_avx512.cc, crc32c_arm64.cc). These work on the raw CRC register:
// crc32c.cc adds the pre/post inversion.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvstore::crc32c_backend {

// Hardware copies of at least this many bytes use streaming (non-temporal) stores. Source and
// destination together then exceed a 2 MiB L2, so the copy is not cache-resident anyway, and
// streaming stores skip reading each destination line before writing it. Measured
// (bench:checksum): a cold 4 MiB or 64 MiB fused copy runs at about 1.3x memcpy with them and
// 0.95x without; at 1 MiB, where both buffers fit in L2, they cost a cache-hot copy about a
// third (below memcpy + a separate checksum), so 1 MiB copies keep ordinary stores.
constexpr size_t kNonTemporalMinBytes = size_t(2) << 20;

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

// False unless this is an aarch64 build on a CPU with the CRC extension.
bool Arm64Supported();
uint32_t Arm64Update(uint32_t reg, const uint8_t* src, size_t n);
uint32_t Arm64CopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n);

}  // namespace kvstore::crc32c_backend
