// CRC-32C (Castagnoli, the iSCSI/ext4 checksum): the checksum the store keeps for every slice of
// every object. Thread-safe, never allocates, never throws; usable from the engine's worker threads.
//
// Why our own code rather than a library: the store needs the copy fused with the checksum (one
// pass over the bytes) and an O(log n) combine, callable from C++ threads; the npm packages are
// JS-only entry points, and Google's crc32c library offers neither the fused copy nor a combine.
//
// Backends (crc32c_*.cc), the best the CPU has chosen once per process:
//   avx512    x86-64 with AVX-512 and VPCLMULQDQ: folding 256 bytes per step by carry-less
//             multiplies (about 4x the crc32 instruction on cache-hot data).
//   sse42     x86-64 with SSE4.2 and PCLMULQDQ: the crc32 instruction on three independent streams
//             whose results are joined by a carry-less multiply (about 8 bytes per cycle).
//   arm64     aarch64 with the CRC extension: crc32cx on three streams joined by table shifts.
//   portable  everywhere else: slicing-by-8 tables (about 0.5 byte per cycle).
// Copies of 2 MiB or more use streaming (non-temporal) stores on the hardware backends, and so do
// smaller pieces of a larger copy when the caller says so (CopyStores::kStreaming).
// KVSTORE_CRC32C_IMPL=portable|sse42|avx512|arm64 (read once, at the first call) forces a backend the
// CPU has; an unknown or unavailable name leaves the automatic choice.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvstore {

// Standard CRC-32C of `data` continuing from `crc` (0 to start): the usual pre/post inversion,
// so Crc32c(Crc32c(0, a, n), b, m) == CRC of a||b and Crc32c(0, "123456789", 9) == 0xE3069283.
uint32_t Crc32c(uint32_t crc, const void* data, size_t len);

// How a copy writes its destination. kAuto: streaming (non-temporal) stores from
// kStreamingCopyMinBytes up (source and destination then exceed a core's L2, and streaming stores
// skip reading each destination line before writing it), ordinary stores below. kStreaming:
// streaming stores at any length, for one piece of a larger copy that is split up (a chunk of a
// multi-MiB transfer): the size of the whole is what decides. The portable backend ignores it.
enum class CopyStores { kAuto, kStreaming };
constexpr size_t kStreamingCopyMinBytes = size_t(2) << 20;

// memcpy(dst, src, len) and Crc32c(crc, src, len) in one pass over the bytes. dst and src must
// not overlap (as memcpy).
uint32_t CopyCrc32c(uint32_t crc, void* dst, const void* src, size_t len, CopyStores stores = CopyStores::kAuto);

// The CRC of A||B from crc_a = CRC(A), crc_b = CRC(B) and len_b = |B|, in O(log len_b) steps
// without the bytes.
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, size_t len_b);

// The backends, for tests and benchmarks that measure or force one.
enum class Crc32cImpl : int { kPortable = 0, kSse42 = 1, kAvx512 = 2, kArm64 = 3 };
constexpr int kCrc32cImplCount = 4;

const char* Crc32cImplName(Crc32cImpl impl);
// The backend for a name ("portable", "sse42", "avx512", "arm64"); false if the name is unknown.
bool Crc32cImplFromName(const char* name, Crc32cImpl* out);
// Whether this CPU (and this build) can run `impl`.
bool Crc32cImplAvailable(Crc32cImpl impl);
// The backend Crc32c/CopyCrc32c use in this process.
Crc32cImpl Crc32cActiveImpl();

// How the avx512 backend copies with ordinary stores (below the streaming size): "memcpy" (memcpy
// 4 KiB, then fold it from L1) or "vector" (one pass, each vector folded and stored), chosen once
// per process by CPU vendor (the faster one differs) or KVSTORE_CRC32C_COPY=memcpy|vector; "none"
// in a build without that backend.
const char* Crc32cAvx512CopyMethod();

// Crc32c / CopyCrc32c with a given backend; `impl` must be available.
uint32_t Crc32cWith(Crc32cImpl impl, uint32_t crc, const void* data, size_t len);
uint32_t CopyCrc32cWith(Crc32cImpl impl, uint32_t crc, void* dst, const void* src, size_t len, CopyStores stores = CopyStores::kAuto);

}  // namespace kvstore
