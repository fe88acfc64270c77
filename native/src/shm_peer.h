// Sending side of the same-host shm transport for one peer: asks the peer (control socket) for
// the fd behind a served range once, maps it, and from then on chunks are memcpy'd. The grant
// covers the peer's served region only, carries its incarnation and its write-fence page (checked
// before every WRITE), and expires when a granted region of the peer goes away (generation page);
// a hang-up of the control socket (peer gone) turns every later chunk into TRANSFER_FAILED
// instead of writing into orphaned memory. The JS thread only ever takes the short grants lock;
// the control round-trip to the peer runs under its own lock.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "auth_handshake.h"
#include "fence_page.h"
#include "unique_fd.h"

namespace kvstore {

// A granted region's mapping here and its fence page; unmapped when the last user lets go, so a
// revocation never unmaps memory a chunk is still copying.
struct GrantMapping {
  void* addr = nullptr;
  size_t len = 0;
  std::unique_ptr<FencePageView> fence;
  // One flag per kPopulateWindow of the mapping: set once its page tables were filled in.
  std::unique_ptr<std::atomic<bool>[]> populated;
  size_t windows = 0;
  static constexpr size_t kPopulateWindow = size_t{2} << 20;
  // Fills in the page-table entries of the windows [p, +n) lies in that the peer already holds,
  // once per window (PopulateResident). For the I/O threads' chunks: a chunk's first touch of
  // fresh shared pages otherwise takes one fault per 4 KiB page.
  void PopulateWindows(const char* p, size_t n) const;
  // Every window not filled in yet, in order, until `stop` is set (ShmPeer's populator thread).
  void PopulateAll(const std::atomic<bool>& stop) const;
  ~GrantMapping();
};

// Where a chunk's bytes are on this side: at == nullptr when the peer said the region is not
// fd-backed (use TCP). `keep` holds the mapping for a chunk on an I/O thread; the JS thread's
// inline copies hold the grants lock instead (no reference count on their path).
struct ShmTarget {
  char* at = nullptr;
  uint64_t incarnation = 0;
  const FencePageView* fence = nullptr;
  std::shared_ptr<const GrantMapping> keep;
};

class ShmPeer {
 public:
  // nullptr when the peer serves no control socket in this network namespace (or its backlog is
  // full: the caller never blocks here). Throws NativeError TRANSFER_FAILED when the watcher
  // thread cannot be started.
  // With `auth` enabled, the first Resolve() runs the handshake (on its I/O thread, never here:
  // Connect is called on the JS thread).
  static std::unique_ptr<ShmPeer> Connect(const std::string& endpoint, int timeout_ms, AuthConfig auth = {});
  ~ShmPeer();
  ShmPeer(const ShmPeer&) = delete;
  ShmPeer& operator=(const ShmPeer&) = delete;

  // The target for the peer's [address, +length), asking the peer when no grant is cached.
  // Throws NativeError ADDRESS_OUT_OF_RANGE / TRANSFER_FAILED / TIMEOUT / UNAUTHENTICATED.
  ShmTarget Resolve(uint64_t address, uint64_t length);
  // The inline paths (JS thread, at most 64 KiB): while the returned lock is held no grant is
  // dropped or unmapped, and FindCachedLocked gives a target (no `keep`) without asking the peer;
  // false unless a live, fd-backed grant is cached. Hold it only for the copy.
  std::unique_lock<std::mutex> LockGrants() { return std::unique_lock<std::mutex>(grants_mu_); }
  bool FindCachedLocked(uint64_t address, uint64_t length, ShmTarget* out) {
    return FindGrantLocked(address, length, out, false) && out->at != nullptr;
  }
  // One poll() of the control socket: false once the peer hung up (exact, a syscall).
  bool Alive();
  // False once the watcher thread saw the control socket hang up (an atomic load, no syscall;
  // set within the watcher's wake-up latency of the peer's death). For the inline read path, where
  // a read in that window returns the bytes the peer held (still mapped here) under the caller's
  // lease; writes and batches keep the exact Alive().
  bool AliveHint() const { return !hung_.load(std::memory_order_acquire); }
  // Unblocks a Resolve() waiting on the peer (engine shutdown).
  void Shutdown();
  const std::string& endpoint() const { return endpoint_; }

 private:
  struct Grant {
    uint64_t region_start, region_length;
    uint64_t incarnation;
    uint64_t generation;
    char* local_region;  // nullptr: known not shareable
    std::shared_ptr<const GrantMapping> mapping;
  };
  void DropStaleGrantsLocked();
  // Under grants_mu_: drops stale grants, then finds the one covering the range (with a
  // reference to its mapping when `keep`).
  bool FindGrantLocked(uint64_t address, uint64_t length, ShmTarget* out, bool keep);
  friend struct GrantMapping;
  static void PopulateResident(void* map, size_t length);
  // Starts GrantMapping::PopulateAll for a new grant on a thread of its own: the transfer that
  // asked for the grant does not wait for it (joined by the destructor).
  void PopulateInBackground(std::shared_ptr<const GrantMapping> mapping);
  ShmPeer(std::string endpoint, UniqueFd ctrl, int timeout_ms, AuthConfig auth)
      : endpoint_(std::move(endpoint)), timeout_ms_(timeout_ms), auth_(std::move(auth)), ctrl_(std::move(ctrl)) {}
  // Blocks in poll() for a hang-up (never for data: replies stay for Resolve) and sets hung_.
  void Watch();

  std::string endpoint_;
  int timeout_ms_;
  AuthConfig auth_;
  bool authenticated_ = false;  // under ctrl_mu_: the handshake passed on ctrl_
  std::mutex ctrl_mu_;    // one control round-trip at a time (I/O threads only)
  std::mutex grants_mu_;  // grants_ and peer_generation_ (short; the JS thread takes it)
  UniqueFd ctrl_;
  std::vector<Grant> grants_;
  const std::atomic<uint64_t>* peer_generation_ = nullptr;  // the peer's page, mapped read-only
  std::atomic<bool> hung_{false};
  std::thread watcher_;  // ends on the peer's hang-up or our shutdown of ctrl_ (destructor)
  struct Populator {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex populators_mu_;
  std::vector<Populator> populators_;  // finished ones are joined when the next starts, the rest by the destructor
  std::atomic<bool> closing_{false};   // tells the populators to stop
};

}  // namespace kvstore
