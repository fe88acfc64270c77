// x86-64 CRC-32C backend: the SSE4.2 crc32 instruction. One crc32 on a 64-bit word has a 3-cycle
// latency but a 1-cycle throughput, so a single dependent chain runs at a third of the unit's
// speed. We split each block into three equal streams, run three independent chains in one loop
// (about 8 bytes per cycle), and join them with carry-less multiplies (PCLMULQDQ) by the right
// powers of x. Compiled with function-level target attributes: the rest of the addon is built
// without -msse4.2, and crc32c.cc only calls in here after Sse42Supported().
#include <algorithm>
#include <cstring>

#include "crc32c_backend.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "crc32c_math.h"

#define KV_CRC_TARGET __attribute__((target("sse4.2,pclmul")))

namespace kvstore::crc32c_backend {

namespace {

using crc32c_math::XPowModP;

// Multiplies a register by x^(8 * bytes): the carry-less product of two reflected 32-bit values
// is the reflected 64-bit value of (c * k * x), and crc32 of a 64-bit word multiplies it by x^32
// mod P; hence k = x^(8 * bytes - 33).
constexpr uint32_t ShiftConstant(size_t bytes) { return XPowModP(8 * bytes - 33); }

KV_CRC_TARGET inline uint32_t Shift(uint32_t c, uint32_t k) {
  __m128i product = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(c)), _mm_cvtsi32_si128(static_cast<int>(k)), 0x00);
  return static_cast<uint32_t>(_mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(product))));
}

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

enum class Copy { kNone, kPlain, kStream };

template <Copy kCopy>
inline void Store64(uint8_t* dst, uint64_t v) {
  if constexpr (kCopy == Copy::kPlain) std::memcpy(dst, &v, 8);
  if constexpr (kCopy == Copy::kStream) _mm_stream_si64(reinterpret_cast<long long*>(dst), static_cast<long long>(v));
}

// Consumes whole blocks of three streams of L bytes. The running register `acc` is shifted past
// each block and the block's own streams start from zero, so no stream waits for the join of the
// previous block (the joins run beside the next block's loop).
template <size_t L, Copy kCopy>
KV_CRC_TARGET inline uint32_t Blocks(uint32_t acc, uint8_t*& dst, const uint8_t*& src, size_t& n) {
  static_assert(L % 8 == 0, "streams are whole words");
  constexpr uint32_t k1 = ShiftConstant(L), k2 = ShiftConstant(2 * L), k3 = ShiftConstant(3 * L);
  while (n >= 3 * L) {
    uint64_t c0 = 0, c1 = 0, c2 = 0;
    for (size_t i = 0; i < L; i += 8) {
      const uint64_t w0 = Load64(src + i), w1 = Load64(src + L + i), w2 = Load64(src + 2 * L + i);
      if constexpr (kCopy != Copy::kNone) {
        Store64<kCopy>(dst + i, w0);
        Store64<kCopy>(dst + L + i, w1);
        Store64<kCopy>(dst + 2 * L + i, w2);
      }
      c0 = _mm_crc32_u64(c0, w0);
      c1 = _mm_crc32_u64(c1, w1);
      c2 = _mm_crc32_u64(c2, w2);
    }
    acc = Shift(acc, k3) ^ Shift(static_cast<uint32_t>(c0), k2) ^ Shift(static_cast<uint32_t>(c1), k1) ^ static_cast<uint32_t>(c2);
    src += 3 * L;
    if constexpr (kCopy != Copy::kNone) dst += 3 * L;
    n -= 3 * L;
  }
  return acc;
}

template <Copy kCopy>
KV_CRC_TARGET uint32_t Update(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n) {
  // Block sizes: the largest amortises the joins (3 per 12 KiB); the smaller ones keep three
  // streams busy on the rest, down to 192 bytes.
  reg = Blocks<4096, kCopy>(reg, dst, src, n);
  reg = Blocks<512, kCopy>(reg, dst, src, n);
  reg = Blocks<64, kCopy>(reg, dst, src, n);
  uint64_t r = reg;
  for (; n >= 8; n -= 8, src += 8) {
    const uint64_t w = Load64(src);
    if constexpr (kCopy != Copy::kNone) {
      Store64<kCopy>(dst, w);
      dst += 8;
    }
    r = _mm_crc32_u64(r, w);
  }
  uint32_t r32 = static_cast<uint32_t>(r);
  for (; n > 0; --n, ++src) {
    if constexpr (kCopy != Copy::kNone) *dst++ = *src;
    r32 = _mm_crc32_u8(r32, *src);
  }
  return r32;
}

}  // namespace

bool Sse42Supported() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
  }();
  return supported;
}

uint32_t Sse42Update(uint32_t reg, const uint8_t* src, size_t n) { return Update<Copy::kNone>(reg, nullptr, src, n); }

uint32_t Sse42CopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n, bool stream) {
  if (!stream) return Update<Copy::kPlain>(reg, dst, src, n);
  // Byte steps until dst is 8-byte aligned, so no streaming store straddles a cache line.
  // Never more than n: a short copy to a misaligned dst would otherwise run past its end (and
  // n - head wrap around).
  const size_t head = std::min<size_t>((8 - reinterpret_cast<uintptr_t>(dst) % 8) % 8, n);
  reg = Update<Copy::kPlain>(reg, dst, src, head);
  reg = Update<Copy::kStream>(reg, dst + head, src + head, n - head);
  _mm_sfence();  // streaming stores are weakly ordered: make them visible before we return
  return reg;
}

}  // namespace kvstore::crc32c_backend

#else  // not x86-64: no hardware backend in this build

namespace kvstore::crc32c_backend {
bool Sse42Supported() { return false; }
uint32_t Sse42Update(uint32_t reg, const uint8_t* src, size_t n) { return PortableUpdate(reg, src, n); }
uint32_t Sse42CopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n, bool stream) {
  return PortableCopyUpdate(reg, dst, src, n, stream);
}
}  // namespace kvstore::crc32c_backend

#endif
