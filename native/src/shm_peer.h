// Sending side of the same-host shm transport for one peer: asks the peer (control socket) for
// the fd behind a registered range once, maps it, and from then on chunks are memcpy'd. The grant
// covers the peer's registered region only and expires when the peer unregisters any region
// (generation page); a hang-up of the control socket (peer gone) turns
// every later chunk into TRANSFER_FAILED instead of writing into orphaned memory.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "unique_fd.h"

namespace kvstore {

class ShmPeer {
 public:
  // nullptr when the peer serves no control socket in this network namespace.
  static std::unique_ptr<ShmPeer> Connect(const std::string& endpoint, int timeout_ms);
  ~ShmPeer();
  ShmPeer(const ShmPeer&) = delete;
  ShmPeer& operator=(const ShmPeer&) = delete;

  // Local pointer for the peer's [address, +length), or nullptr when that region is not
  // fd-backed (use TCP). Throws NativeError ADDRESS_OUT_OF_RANGE / TRANSFER_FAILED / TIMEOUT.
  char* Resolve(uint64_t address, uint64_t length);
  // Like Resolve() but never asks the peer: nullptr unless a live grant is cached.
  char* ResolveCached(uint64_t address, uint64_t length);
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
    char* local_region;   // nullptr: known not shareable
    void* map_addr;
    size_t map_len;
    uint64_t generation;
  };
  void DropStaleGrants();
  // Under mu_: drops stale grants, then finds the one covering the range; true with *out = its
  // local address (nullptr: the peer said the region is not fd-backed), false when none covers it.
  bool FindGrantLocked(uint64_t address, uint64_t length, char** out);
  static void PopulateResident(void* map, size_t length);
  ShmPeer(std::string endpoint, UniqueFd ctrl) : endpoint_(std::move(endpoint)), ctrl_(std::move(ctrl)) {}
  // Blocks in poll() for a hang-up (never for data: replies stay for Resolve) and sets hung_.
  void Watch();

  std::string endpoint_;
  std::mutex mu_;
  UniqueFd ctrl_;
  std::vector<Grant> grants_;
  const std::atomic<uint64_t>* peer_generation_ = nullptr;  // the peer's page, mapped read-only
  std::atomic<bool> hung_{false};
  std::thread watcher_;  // ends on the peer's hang-up or our shutdown of ctrl_ (destructor)
};

}  // namespace kvstore
