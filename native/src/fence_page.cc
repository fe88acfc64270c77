// FencePage / FencePageView (see fence_page.h).
#include "fence_page.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <new>
#include <thread>

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010  // Linux 5.1
#endif

namespace kvstore {

FencePage::FencePage() {
  UniqueFd fd(::memfd_create("kvstore-write-fence", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid() || ::ftruncate(fd.get(), kFencePageBytes) != 0) return;
  void* p = ::mmap(nullptr, kFencePageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return;
  // Peers may map it, never writably; our own mapping predates the seal and stays writable.
  // A kernel without F_SEAL_FUTURE_WRITE still gets the size seals (peers are same-host processes
  // that are handed the region itself read-write anyway).
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE) != 0) {
    ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
  }
  page_ = new (p) FencePageLayout();  // zero-filled memfd: seq 0, no fence
  fd_ = std::move(fd);
}

FencePage::~FencePage() {
  if (page_) ::munmap(page_, kFencePageBytes);
}

void FencePage::Publish(const WriteFence& fence) {
  if (!page_) return;
  const uint64_t s = page_->seq.load(std::memory_order_relaxed);
  page_->seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  page_->below.store(fence.below, std::memory_order_relaxed);
  const size_t n = std::min(fence.revoked.size(), kMaxRevokedGenerations);
  for (size_t i = 0; i < n; ++i) page_->revoked[i].store(fence.revoked[i], std::memory_order_relaxed);
  page_->count.store(n, std::memory_order_relaxed);
  page_->seq.store(s + 2, std::memory_order_release);
}

FencePageView::FencePageView(int fd) {
  if (fd < 0) return;
  void* p = ::mmap(nullptr, kFencePageBytes, PROT_READ, MAP_SHARED, fd, 0);
  if (p != MAP_FAILED) page_ = static_cast<const FencePageLayout*>(p);
}

FencePageView::~FencePageView() {
  if (page_) ::munmap(const_cast<FencePageLayout*>(page_), kFencePageBytes);
}

bool FencePageView::Refuses(uint64_t generation) const {
  if (!page_) return true;
  // An update takes the owner well under a microsecond; after this many tries the owner is gone
  // or stuck mid-update, and the write is refused.
  for (int attempt = 0; attempt < 10000; ++attempt) {
    const uint64_t s1 = page_->seq.load(std::memory_order_acquire);
    if (s1 & 1) {
      if (attempt > 100) std::this_thread::yield();
      continue;
    }
    const uint64_t below = page_->below.load(std::memory_order_relaxed);
    uint64_t count = page_->count.load(std::memory_order_relaxed);
    if (count > kMaxRevokedGenerations) count = kMaxRevokedGenerations;
    bool listed = false;
    for (uint64_t i = 0; i < count && !listed; ++i) listed = page_->revoked[i].load(std::memory_order_relaxed) == generation;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (page_->seq.load(std::memory_order_relaxed) != s1) continue;
    return generation < below || listed;
  }
  return true;
}

}  // namespace kvstore
