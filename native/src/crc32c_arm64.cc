// aarch64 CRC-32C backend: the CRC32C instructions of the ARMv8 CRC extension (mandatory from
// ARMv8.1, found on every server core in use). Like the SSE4.2 backend, three independent streams
// per block keep the unit busy (one crc32cx has a latency of a few cycles but issues every
// cycle); the streams are joined by multiplying registers by fixed powers of x, here with four
// 256-entry tables per power (the multiply is linear, so it splits by byte), so the backend needs
// no PMULL. Tested under qemu-user (native/checksum.test.ts cross-compiles a self-test when
// aarch64-linux-gnu-g++ and qemu-aarch64 are installed); its speed has not been measured here.
#include <cstring>

#include "crc32c_backend.h"

#if defined(__aarch64__)
#include <arm_acle.h>
#include <sys/auxv.h>

#include <array>

#include "crc32c_math.h"

#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif

#define KV_CRC_TARGET __attribute__((target("+crc")))

namespace kvstore::crc32c_backend {

namespace {

// Multiplication of a register by x^(8 * bytes) mod P, one table per register byte.
struct ShiftTable {
  std::array<std::array<uint32_t, 256>, 4> t;
  uint32_t operator()(uint32_t c) const { return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24]; }
};

constexpr ShiftTable MakeShift(size_t bytes) {
  ShiftTable s{};
  const uint32_t k = crc32c_math::XPowModP(bytes, 3);
  for (uint32_t j = 0; j < 4; ++j) {
    for (uint32_t b = 0; b < 256; ++b) s.t[j][b] = crc32c_math::MulModP(b << (8 * j), k);
  }
  return s;
}

template <size_t L>
struct BlockShifts {
  static constexpr ShiftTable k1 = MakeShift(L), k2 = MakeShift(2 * L), k3 = MakeShift(3 * L);
};

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Whole blocks of three streams of L bytes; `acc` is shifted past each block, whose streams start
// from zero, so no stream waits for the previous block's join.
template <size_t L, bool kCopy>
KV_CRC_TARGET inline uint32_t Blocks(uint32_t acc, uint8_t*& dst, const uint8_t*& src, size_t& n) {
  using S = BlockShifts<L>;
  while (n >= 3 * L) {
    uint32_t c0 = 0, c1 = 0, c2 = 0;
    for (size_t i = 0; i < L; i += 8) {
      const uint64_t w0 = Load64(src + i), w1 = Load64(src + L + i), w2 = Load64(src + 2 * L + i);
      if constexpr (kCopy) {
        std::memcpy(dst + i, &w0, 8);
        std::memcpy(dst + L + i, &w1, 8);
        std::memcpy(dst + 2 * L + i, &w2, 8);
      }
      c0 = __crc32cd(c0, w0);
      c1 = __crc32cd(c1, w1);
      c2 = __crc32cd(c2, w2);
    }
    acc = S::k3(acc) ^ S::k2(c0) ^ S::k1(c1) ^ c2;
    src += 3 * L;
    if constexpr (kCopy) dst += 3 * L;
    n -= 3 * L;
  }
  return acc;
}

template <bool kCopy>
KV_CRC_TARGET uint32_t Update(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n) {
  reg = Blocks<4096, kCopy>(reg, dst, src, n);
  reg = Blocks<256, kCopy>(reg, dst, src, n);
  for (; n >= 8; n -= 8, src += 8) {
    const uint64_t w = Load64(src);
    if constexpr (kCopy) {
      std::memcpy(dst, &w, 8);
      dst += 8;
    }
    reg = __crc32cd(reg, w);
  }
  for (; n > 0; --n, ++src) {
    if constexpr (kCopy) *dst++ = *src;
    reg = __crc32cb(reg, *src);
  }
  return reg;
}

}  // namespace

bool Arm64Supported() {
  static const bool supported = (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
  return supported;
}

uint32_t Arm64Update(uint32_t reg, const uint8_t* src, size_t n) { return Update<false>(reg, nullptr, src, n); }
// `stream` is ignored: no streaming stores in this backend (not measured on aarch64 hardware).
uint32_t Arm64CopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n, bool /*stream*/) { return Update<true>(reg, dst, src, n); }

}  // namespace kvstore::crc32c_backend

#else  // not aarch64: no arm64 backend in this build

namespace kvstore::crc32c_backend {
bool Arm64Supported() { return false; }
uint32_t Arm64Update(uint32_t reg, const uint8_t* src, size_t n) { return PortableUpdate(reg, src, n); }
uint32_t Arm64CopyUpdate(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t n, bool stream) {
  return PortableCopyUpdate(reg, dst, src, n, stream);
}
}  // namespace kvstore::crc32c_backend

#endif
