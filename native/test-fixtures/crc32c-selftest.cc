// Self-test of the CRC-32C core without node (native/checksum.test.ts cross-compiles it for
// aarch64 and runs it under qemu-user, the only way to run the arm64 backend on x86 CI): every
// backend the CPU has, against a bitwise reference, on every length 0..1100 and random lengths
// up to 100 KiB at unaligned offsets; the fused copy; combine. Prints "ok <backends>" or the
// first mismatch and exits 1.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../src/crc32c.h"

using namespace kvstore;

static uint32_t Reference(uint32_t crc, const uint8_t* p, size_t n) {
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

static uint64_t state = 88172645463325252ull;
static uint64_t Next() {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

static int Fail(Crc32cImpl impl, const char* what, size_t len, size_t off) {
  std::printf("FAIL %s %s length %zu offset %zu\n", Crc32cImplName(impl), what, len, off);
  return 1;
}

int main() {
  if (Crc32c(0, "123456789", 9) != 0xE3069283u) return std::printf("FAIL check value\n"), 1;
  std::vector<uint8_t> src(100 * 1024 + 64), dst(src.size() + 64);
  for (auto& b : src) b = static_cast<uint8_t>(Next());
  std::string names;
  for (int i = 0; i < kCrc32cImplCount; ++i) {
    const auto impl = static_cast<Crc32cImpl>(i);
    if (!Crc32cImplAvailable(impl)) continue;
    names += std::string(" ") + Crc32cImplName(impl);
    for (size_t t = 0; t < 1600; ++t) {
      const size_t len = t <= 1100 ? t : Next() % (100 * 1024);
      const size_t off = Next() % 64, doff = Next() % 64;
      const uint32_t seed = static_cast<uint32_t>(Next());
      const uint32_t want = Reference(seed, src.data() + off, len);
      if (Crc32cWith(impl, seed, src.data() + off, len) != want) return Fail(impl, "crc", len, off);
      std::memset(dst.data(), 0xee, dst.size());
      if (CopyCrc32cWith(impl, seed, dst.data() + doff, src.data() + off, len) != want) return Fail(impl, "copy crc", len, off);
      if (std::memcmp(dst.data() + doff, src.data() + off, len) != 0 || dst[doff + len] != 0xee) return Fail(impl, "copy bytes", len, off);
      const size_t split = len ? Next() % len : 0;
      const uint32_t a = Crc32cWith(impl, seed, src.data() + off, split);
      const uint32_t b = Crc32cWith(impl, 0, src.data() + off + split, len - split);
      if (Crc32cCombine(a, b, len - split) != want) return Fail(impl, "combine", len, off);
    }
  }
  std::printf("ok%s (active %s)\n", names.c_str(), Crc32cImplName(Crc32cActiveImpl()));
  return 0;
}
