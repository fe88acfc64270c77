// x86-64 CRC-32C backend for CPUs with AVX-512 and VPCLMULQDQ (Ice Lake, Sapphire Rapids, Zen 4):
// folding by carry-less multiplication, 256 bytes per step in four 64-byte accumulators, about
// four times the speed of the crc32 instruction on cache-hot data. Each 128-bit lane of an
// accumulator holds a 128-bit polynomial; moving it D bits further along the message multiplies
// it by x^D, which is replaced by two 32-bit constants (x^D mod P per 64-bit half) and two
// carry-less multiplies. At the end the lanes fold into one 128-bit value, and two crc32
// instructions reduce that to the CRC register. Short inputs and the last bytes go through the
// SSE4.2 backend (three crc32 streams).
#include <cstdlib>
#include <cstring>

#include "crc32c_backend.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "crc32c_math.h"

// GCC 12's AVX-512 headers make "undefined" vectors by initialising them from themselves, which
// -Wuninitialized reports wherever those intrinsics are inlined: a false positive.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define KV_CRC_TARGET __attribute__((target("avx512f,avx512vl,avx512bw,vpclmulqdq,pclmul,sse4.2")))

namespace kvstore::crc32c_backend {

namespace {

using crc32c_math::XPowModP;

// The 128-bit lane (lo, hi) stands for lo * x^64 + hi (the message is bit-reflected: the low
// 64 bits come first). The carry-less product of a reflected 64-bit half and a reflected 32-bit
// constant k is the reflected 128-bit value of (half * k * x^33), so moving the lane D bits takes
// k_lo = x^(D + 64 - 33) for the low half and k_hi = x^(D - 33) for the high half.
struct FoldConstants {
  uint64_t lo;
  uint64_t hi;
};
constexpr FoldConstants Fold(size_t bits) { return {XPowModP(bits + 31), XPowModP(bits - 33)}; }

constexpr FoldConstants kBy2048 = Fold(2048);  // one accumulator over a 256-byte step
constexpr FoldConstants kBy512 = Fold(512);    // one 64-byte vector
constexpr FoldConstants kBy384 = Fold(384);
constexpr FoldConstants kBy256 = Fold(256);
constexpr FoldConstants kBy128 = Fold(128);

KV_CRC_TARGET inline __m512i Broadcast(FoldConstants k) {
  return _mm512_broadcast_i32x4(_mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo)));
}

// x * x^D + data, for each 128-bit lane.
KV_CRC_TARGET inline __m512i FoldInto(__m512i x, __m512i k, __m512i data) {
  const __m512i lo = _mm512_clmulepi64_epi128(x, k, 0x00);
  const __m512i hi = _mm512_clmulepi64_epi128(x, k, 0x11);
  return _mm512_ternarylogic_epi64(lo, hi, data, 0x96);  // lo ^ hi ^ data
}

enum class Copy { kNone, kStream, kStore };

template <Copy kCopy>
KV_CRC_TARGET inline __m512i Load(uint8_t* dst, const uint8_t* src) {
  const __m512i v = _mm512_loadu_si512(src);
  if constexpr (kCopy == Copy::kStream) _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), v);
  if constexpr (kCopy == Copy::kStore) _mm512_storeu_si512(dst, v);
  return v;
}

// Folds all whole 64-byte vectors of [src, src + n) (n >= 256) into the register; returns the
// register and leaves n % 64 bytes for the caller.
template <Copy kCopy>
KV_CRC_TARGET uint32_t Vectors(uint32_t reg, uint8_t*& dst, const uint8_t*& src, size_t& n) {
  const __m512i k2048 = Broadcast(kBy2048);
  const __m512i k512 = Broadcast(kBy512);
  // The register so far is the first 32 bits of the message's remainder: xor it in.
  __m512i x0 = _mm512_xor_si512(Load<kCopy>(dst, src), _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<int>(reg)));
  __m512i x1 = Load<kCopy>(dst + 64, src + 64);
  __m512i x2 = Load<kCopy>(dst + 128, src + 128);
  __m512i x3 = Load<kCopy>(dst + 192, src + 192);
  src += 256, dst += 256, n -= 256;
  for (; n >= 256; src += 256, dst += 256, n -= 256) {
    x0 = FoldInto(x0, k2048, Load<kCopy>(dst, src));
    x1 = FoldInto(x1, k2048, Load<kCopy>(dst + 64, src + 64));
    x2 = FoldInto(x2, k2048, Load<kCopy>(dst + 128, src + 128));
    x3 = FoldInto(x3, k2048, Load<kCopy>(dst + 192, src + 192));
  }
  x1 = FoldInto(x0, k512, x1);
  x2 = FoldInto(x1, k512, x2);
  x3 = FoldInto(x2, k512, x3);
  for (; n >= 64; src += 64, dst += 64, n -= 64) x3 = FoldInto(x3, k512, Load<kCopy>(dst, src));
  // Lanes 0..2 move 384, 256 and 128 bits to lane 3's place; lane 3 stays.
  const __m512i k_lanes = _mm512_set_epi64(0, 0, static_cast<long long>(kBy128.hi), static_cast<long long>(kBy128.lo),
                                           static_cast<long long>(kBy256.hi), static_cast<long long>(kBy256.lo),
                                           static_cast<long long>(kBy384.hi), static_cast<long long>(kBy384.lo));
  const __m512i moved = FoldInto(x3, k_lanes, _mm512_maskz_mov_epi64(0xC0, x3));
  __m256i half = _mm256_xor_si256(_mm512_castsi512_si256(moved), _mm512_extracti64x4_epi64(moved, 1));
  __m128i lane = _mm_xor_si128(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
  // (lo * x^64 + hi) * x^32 mod P is the register: crc32 of the two halves from zero.
  uint64_t r = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(lane)));
  r = _mm_crc32_u64(r, static_cast<uint64_t>(_mm_extract_epi64(lane, 1)));
  return static_cast<uint32_t>(r);
}

// How a copy with ordinary stores runs (Avx512CopyUpdate without `stream`); the faster one
// depends on the CPU. kMemcpyThenFold: memcpy 4 KiB, then fold those bytes while they sit in L1;
// on Intel Sapphire Rapids as fast as vector stores when hot and faster into cold memory (memcpy's
// rep movsb does not read the lines it overwrites). kVectorStores: one pass, each 64-byte vector
// folded and stored; on AMD EPYC (this project's 2026-11 machines) memcpy + fold ran at 0.5-0.8x
// of it at every size from 1 KiB to 1 MiB, hot or cold (docs/native.md "Checksums").
enum class PlainCopy { kMemcpyThenFold, kVectorStores };

// Chosen once per process: by CPU vendor, or KVSTORE_CRC32C_COPY=memcpy|vector (other values ignored).
PlainCopy ActivePlainCopy() {
  static const PlainCopy choice = [] {
    const char* env = std::getenv("KVSTORE_CRC32C_COPY");
    if (env && std::strcmp(env, "memcpy") == 0) return PlainCopy::kMemcpyThenFold;
    if (env && std::strcmp(env, "vector") == 0) return PlainCopy::kVectorStores;
    __builtin_cpu_init();
    return __builtin_cpu_is("amd") ? PlainCopy::kVectorStores : PlainCopy::kMemcpyThenFold;
  }();
  return choice;
}

}  // namespace

const char* Avx512PlainCopyName() { return ActivePlainCopy() == PlainCopy::kVectorStores ? "vector" : "memcpy"; }

bool Avx512Supported() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.2");
  }();
  return supported;
}

// Below this the fixed cost of the lane reduction outweighs the faster loop.
constexpr size_t kMinVectorBytes = 256;

uint32_t Avx512Update(uint32_t reg, const uint8_t* src, size_t n) {
  if (n >= kMinVectorBytes) {
    uint8_t* unused = const_cast<uint8_t*>(src);  // never written with Copy::kNone; keeps its arithmetic in bounds
    reg = Vectors<Copy::kNone>(reg, unused, src, n);
  }
  return Sse42Update(reg, src, n);
}

uint32_t Avx512CopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n, bool stream) {
  if (n < kMinVectorBytes) return Sse42CopyUpdate(reg, dst, src, n, false);  // too short to gain from streaming
  if (!stream && ActivePlainCopy() == PlainCopy::kVectorStores) {
    reg = Vectors<Copy::kStore>(reg, dst, src, n);
    return Sse42CopyUpdate(reg, dst, src, n, false);
  }
  if (!stream) {
    // memcpy a chunk, then fold the destination bytes while they sit in L1 (PlainCopy).
    constexpr size_t kChunk = 4096;
    for (size_t done = 0; done < n; done += kChunk) {
      const size_t m = n - done < kChunk ? n - done : kChunk;
      std::memcpy(dst + done, src + done, m);
      reg = Avx512Update(reg, dst + done, m);
    }
    return reg;
  }
  // Streaming 64-byte stores need an aligned destination: copy the head through the small path.
  const size_t head = (64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64;
  reg = Sse42CopyUpdate(reg, dst, src, head, false);
  dst += head, src += head, n -= head;
  if (n >= kMinVectorBytes) reg = Vectors<Copy::kStream>(reg, dst, src, n);
  _mm_sfence();  // streaming stores are weakly ordered: make them visible before we return
  return Sse42CopyUpdate(reg, dst, src, n, false);
}

}  // namespace kvstore::crc32c_backend

#else  // not x86-64: no AVX-512 backend in this build

namespace kvstore::crc32c_backend {
bool Avx512Supported() { return false; }
const char* Avx512PlainCopyName() { return "none"; }
uint32_t Avx512Update(uint32_t reg, const uint8_t* src, size_t n) { return PortableUpdate(reg, src, n); }
uint32_t Avx512CopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n, bool stream) {
  return PortableCopyUpdate(reg, dst, src, n, stream);
}
}  // namespace kvstore::crc32c_backend

#endif
