// CRC-32C arithmetic shared by the backends, all constexpr: polynomials modulo P in the
// bit-reflected form the CRC uses (bit 31 holds x^0, bit 0 holds x^31), products, powers of x,
// and the slicing-by-8 tables. The raw "register" functions here have no pre/post inversion.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace kvstore::crc32c_math {

// The Castagnoli polynomial 0x1EDC6F41, reflected.
constexpr uint32_t kPoly = 0x82F63B78u;
// The polynomial 1 (x^0) in reflected form.
constexpr uint32_t kOne = 0x80000000u;

// a * b mod P.
constexpr uint32_t MulModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (int i = 0; i < 32; ++i) {  // bit 31 - i of `a` is the coefficient of x^i
    if (a & (kOne >> i)) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;  // b *= x
  }
  return product;
}

// kX2N[k] = x^(2^k) mod P, for every k a size_t bit count can reach (3 + 64).
constexpr std::array<uint32_t, 68> MakeX2N() {
  std::array<uint32_t, 68> t{};
  t[0] = kOne >> 1;  // x^1
  for (size_t k = 1; k < t.size(); ++k) t[k] = MulModP(t[k - 1], t[k - 1]);
  return t;
}
constexpr std::array<uint32_t, 68> kX2N = MakeX2N();

// x^(n * 2^k) mod P, in O(log n) products.
constexpr uint32_t XPowModP(uint64_t n, unsigned k = 0) {
  uint32_t p = kOne;
  for (; n != 0; n >>= 1, ++k) {
    if (n & 1) p = MulModP(kX2N[k], p);
  }
  return p;
}

// Tables for slicing-by-8: kTables[0] is the classic byte-at-a-time table; kTables[j][b] is the
// register contribution of byte b followed by j zero bytes.
using SliceTables = std::array<std::array<uint32_t, 256>, 8>;
constexpr SliceTables MakeSliceTables() {
  SliceTables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][b] = c;
  }
  for (size_t j = 1; j < 8; ++j) {
    for (uint32_t b = 0; b < 256; ++b) t[j][b] = (t[j - 1][b] >> 8) ^ t[0][t[j - 1][b] & 0xff];
  }
  return t;
}

}  // namespace kvstore::crc32c_math
