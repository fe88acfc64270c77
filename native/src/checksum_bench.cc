// Benchmark loops for the CRC-32C primitives; see checksum_bench.h.
#include "checksum_bench.h"

#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "native_error.h"

namespace kvstore {

namespace {

// A pre-faulted anonymous mapping, unmapped on scope exit.
class BenchBuffer {
 public:
  explicit BenchBuffer(size_t n) : size_(n ? n : 1) {
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw NativeError("MAP_FAILED", ErrnoMessage("checksum bench buffer", errno));
    data_ = static_cast<uint8_t*>(p);
    for (size_t i = 0; i < size_; ++i) data_[i] = static_cast<uint8_t>(i * 131 + 7);
  }
  ~BenchBuffer() { ::munmap(data_, size_); }
  BenchBuffer(const BenchBuffer&) = delete;
  BenchBuffer& operator=(const BenchBuffer&) = delete;
  uint8_t* data() const { return data_; }

 private:
  uint8_t* data_;
  size_t size_;
};

template <typename Op>
double Timed(uint64_t iterations, size_t size, size_t slots, Op op) {
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < iterations; ++i) {
    op((i % slots) * size);
    asm volatile("" ::: "memory");  // keep every copy: the compiler must not drop or merge them
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

ChecksumBenchTimes ChecksumBenchRun(Crc32cImpl impl, size_t size, uint64_t iterations, size_t span) {
  if (!Crc32cImplAvailable(impl)) throw NativeError("INVALID_ARGUMENT", std::string("CRC-32C backend not available: ") + Crc32cImplName(impl));
  const size_t slots = span > size && size > 0 ? span / size : 1;
  BenchBuffer src(size * slots), dst(size * slots);
  volatile uint32_t sink = 0;
  ChecksumBenchTimes t{};
  t.memcpy_s = Timed(iterations, size, slots, [&](size_t off) { std::memcpy(dst.data() + off, src.data() + off, size); });
  t.crc32c_s = Timed(iterations, size, slots, [&](size_t off) { sink = sink + Crc32cWith(impl, 0, src.data() + off, size); });
  t.separate_s = Timed(iterations, size, slots, [&](size_t off) {
    std::memcpy(dst.data() + off, src.data() + off, size);
    sink = sink + Crc32cWith(impl, 0, dst.data() + off, size);
  });
  t.fused_s = Timed(iterations, size, slots, [&](size_t off) { sink = sink + CopyCrc32cWith(impl, 0, dst.data() + off, src.data() + off, size); });
  (void)sink;
  return t;
}

}  // namespace kvstore
