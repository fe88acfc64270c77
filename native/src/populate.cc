// Populate(): the range is cut in one slice per thread; each backs its slice in 64 MiB steps with
// MADV_POPULATE_WRITE (one kernel call faults a whole step in, no per-page trap). Kernels before
// 5.14 answer EINVAL: those slices are touched instead, one atomic add of zero per page, which
// faults the page in for writing without changing a byte that may already be there.
#include "populate.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <thread>
#include <vector>

namespace kvstore {

namespace {

constexpr int kMadvPopulateWrite = 23;  // MADV_POPULATE_WRITE; older libc headers lack it
constexpr size_t kStep = size_t{64} << 20;

// One slice; returns 0, or the errno that stopped it. `touched` is set when it fell back.
int PopulateSlice(char* begin, char* end, size_t page, std::atomic<bool>* touched) {
  for (char* p = begin; p < end; p += kStep) {
    size_t n = std::min(kStep, static_cast<size_t>(end - p));
    if (!touched->load(std::memory_order_relaxed) && ::madvise(p, n, kMadvPopulateWrite) == 0) continue;
    if (!touched->load(std::memory_order_relaxed)) {
      if (errno != EINVAL) return errno;
      touched->store(true, std::memory_order_relaxed);
    }
    for (char* q = p; q < p + n; q += page) __atomic_fetch_add(q, 0, __ATOMIC_RELAXED);
  }
  return 0;
}

}  // namespace

PopulateResult Populate(char* base, size_t length, unsigned threads) {
  PopulateResult r;
  size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (threads == 0) threads = std::min(8u, std::max(1u, std::thread::hardware_concurrency()));
  // A slice per thread, page aligned, at least one step each (threads on tiny ranges cost more than they save).
  size_t slices = std::max<size_t>(1, std::min<size_t>(threads, (length + kStep - 1) / kStep));
  size_t per = ((length / slices) + page - 1) / page * page;
  std::atomic<bool> touched{false};
  std::vector<int> errors(slices, 0);
  std::vector<std::thread> pool;
  for (size_t i = 0; i < slices; i++) {
    char* b = base + std::min(length, i * per);
    char* e = i + 1 == slices ? base + length : base + std::min(length, (i + 1) * per);
    if (i + 1 == slices) {
      errors[i] = PopulateSlice(b, e, page, &touched);
    } else {
      pool.emplace_back([=, &touched, &errors] { errors[i] = PopulateSlice(b, e, page, &touched); });
    }
  }
  for (auto& t : pool) t.join();
  for (int e : errors) {
    if (e != 0) {
      r.error = e;
      break;
    }
  }
  r.method = touched.load() ? "touch" : "madvise";
  r.threads = static_cast<unsigned>(slices);
  return r;
}

}  // namespace kvstore
