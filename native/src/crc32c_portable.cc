// Portable CRC-32C backend: slicing-by-8 (eight 1 KiB tables, one 8-byte word per step, about
// 1 byte per cycle). Used on CPUs without the crc32 instruction and on non-x86 builds.
#include <cstring>

#include "crc32c_backend.h"
#include "crc32c_math.h"

namespace kvstore::crc32c_backend {

namespace {

constexpr crc32c_math::SliceTables kT = crc32c_math::MakeSliceTables();

inline uint64_t LoadLE64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

inline uint32_t Word(uint32_t reg, uint64_t w) {
  w ^= reg;
  return kT[7][w & 0xff] ^ kT[6][(w >> 8) & 0xff] ^ kT[5][(w >> 16) & 0xff] ^ kT[4][(w >> 24) & 0xff] ^
         kT[3][(w >> 32) & 0xff] ^ kT[2][(w >> 40) & 0xff] ^ kT[1][(w >> 48) & 0xff] ^ kT[0][w >> 56];
}

inline uint32_t Byte(uint32_t reg, uint8_t b) { return (reg >> 8) ^ kT[0][(reg ^ b) & 0xff]; }

}  // namespace

uint32_t PortableUpdate(uint32_t reg, const uint8_t* src, size_t n) {
  for (; n >= 8; n -= 8, src += 8) reg = Word(reg, LoadLE64(src));
  for (; n > 0; --n) reg = Byte(reg, *src++);
  return reg;
}

uint32_t PortableCopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n, bool /*stream: no such stores here*/) {
  for (; n >= 8; n -= 8, src += 8, dst += 8) {
    uint64_t w;
    std::memcpy(&w, src, 8);
    std::memcpy(dst, &w, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    reg = Word(reg, w);
  }
  for (; n > 0; --n) {
    *dst++ = *src;
    reg = Byte(reg, *src++);
  }
  return reg;
}

}  // namespace kvstore::crc32c_backend
