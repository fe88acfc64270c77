// The write fence of a served, fd-backed region published on a small shared page, so a same-host
// peer that memcpy's into the region (shm transport) can check the fence before each chunk
// without asking. The owner maps it read-write and writes under a sequence counter (odd while
// writing); peers get the fd sealed against writable mappings (F_SEAL_FUTURE_WRITE) and map it
// read-only. A reader that never sees a stable counter (an owner that died mid-update) treats the
// write as fenced: failing a write is safe, landing a stale one is not.
#pragma once
#include <atomic>
#include <cstdint>

#include "unique_fd.h"
#include "write_fence.h"

namespace kvstore {

struct FencePageLayout {
  std::atomic<uint64_t> seq;    // odd while the owner writes
  std::atomic<uint64_t> below;
  std::atomic<uint64_t> count;  // entries of revoked in use
  std::atomic<uint64_t> revoked[kMaxRevokedGenerations];
};
constexpr size_t kFencePageBytes = 8192;
static_assert(sizeof(FencePageLayout) <= kFencePageBytes, "fence layout fits its page");

// Owner side: the page of one region. Invalid (valid() false) when it could not be made; the
// region is then not handed out over shm.
class FencePage {
 public:
  FencePage();
  ~FencePage();
  FencePage(const FencePage&) = delete;
  FencePage& operator=(const FencePage&) = delete;
  bool valid() const { return page_ != nullptr; }
  int fd() const { return fd_.get(); }
  // Owner thread only (the table's lock orders writers).
  void Publish(const WriteFence& fence);

 private:
  UniqueFd fd_;
  FencePageLayout* page_ = nullptr;
};

// Reader side: a peer's page mapped read-only (munmap on destruction).
class FencePageView {
 public:
  // Maps `fd` read-only; valid() false when that fails.
  explicit FencePageView(int fd);
  ~FencePageView();
  FencePageView(const FencePageView&) = delete;
  FencePageView& operator=(const FencePageView&) = delete;
  bool valid() const { return page_ != nullptr; }
  // True when the fence now published refuses a WRITE of `generation` (also when no consistent
  // snapshot could be read).
  bool Refuses(uint64_t generation) const;

 private:
  const FencePageLayout* page_ = nullptr;
};

}  // namespace kvstore
