// The registered memory regions of one engine: the only ranges a remote peer (or a local
// transfer) may touch, each with a random incarnation, a serve flag (peers reach only served
// regions; the others are local buffers for this engine's own transfers) and, for served
// regions, a write fence. Threads that move bytes pin the region under a short lock and move
// them without it; unregistering removes the region at once and reports (through WaiterDone,
// never blocking the caller) when the pins already held are gone. No I/O ever runs under the lock.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "fence_page.h"
#include "paged_file.h"
#include "unique_fd.h"
#include "write_fence.h"

namespace kvstore {

class RegionTable {
 public:
  enum class Verdict { kOk, kOutOfRange, kStale, kFenced };
  // Called without the lock, on the thread that dropped the last awaited pin (or the caller of
  // Unregister/SetFence never: those report "nothing to wait for" through *pending instead).
  using WaiterDone = std::function<void(uint64_t waiter)>;

  struct Region;

  // A region held while bytes move in it: unregister and setFence wait for it. Movable.
  class Pin {
   public:
    Pin() = default;
    ~Pin() { Release(); }
    Pin(Pin&& o) noexcept;
    Pin& operator=(Pin&& o) noexcept;
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;
    void Release();
    bool held() const { return table_ != nullptr; }
    // True when [start, +length) lies in the pinned region (its bounds never change: no lock).
    bool Covers(uint64_t start, uint64_t length) const;
    // The paged file behind the pinned served region (paged_file.h); nullptr for memory.
    const PagedFile* file() const;
    // Where `address` (in the region) is in that file; only when file() is not nullptr.
    uint64_t FileOffset(uint64_t address) const;

   private:
    friend class RegionTable;
    RegionTable* table_ = nullptr;
    std::shared_ptr<Region> region_;
    uint64_t id_ = 0;
  };

  // What a same-host peer is told about the served region holding a range (shm grant).
  struct Served {
    uint64_t start = 0, size = 0, incarnation = 0;
    bool shareable = false;  // fd-backed, with a fence page
    UniqueFd fence_fd;       // a dup of the region's fence page fd when shareable
  };

  explicit RegionTable(WaiterDone done = {});
  ~RegionTable();
  RegionTable(const RegionTable&) = delete;
  RegionTable& operator=(const RegionTable&) = delete;

  // Returns the new region's incarnation. A region registered at the same address is replaced
  // (bytes already moving in it finish; later requests naming its incarnation are STALE).
  uint64_t Register(uint64_t address, uint64_t size, bool serve);
  // Removes the region registered at `address`: no new pin can start on it. False when none.
  // *pending is true when pins are still held: `waiter` is then reported once they are gone.
  bool Unregister(uint64_t address, uint64_t waiter, bool* pending);
  // Installs `fence` (moving forward only) on the served region registered at `address`; false
  // when there is none. *pending is true when WRITEs the new fence refuses are still moving
  // bytes: `waiter` is then reported once they are gone.
  bool SetFence(uint64_t address, const WriteFence& fence, uint64_t waiter, bool* pending);

  // The remote side of a request (a peer's, or this engine's own memcpyLocal transfer): the op's
  // whole range must lie in one served region, with the expected incarnation (0: any) and, for a
  // WRITE, a fence that accepts `generation`. kOk fills *pin.
  Verdict PinRemote(uint64_t start, uint64_t length, bool write, uint64_t incarnation, uint64_t generation, Pin* pin);
  // The same checks, no pin: for the JS thread's inline copies (only the JS thread unregisters).
  Verdict CheckRemote(uint64_t start, uint64_t length, bool write, uint64_t incarnation, uint64_t generation) const;
  // The local side of this engine's own transfers: any registered region, served or not.
  bool ContainsLocal(uint64_t start, uint64_t length) const;
  bool PinLocal(uint64_t start, uint64_t length, Pin* pin);
  // The served region holding [address, +length) for a shm grant; false when none.
  bool FindServed(uint64_t address, uint64_t length, Served* out) const;

  // A shared page holding a counter bumped whenever a served fd-backed region (the only kind
  // ever granted) goes away: same-host peers that were handed fds map it and drop their grants
  // when it moves (revocation). fd -1 if it could not be made.
  int generation_fd() const { return gen_fd_.get(); }
  uint64_t generation() const { return gen_->load(std::memory_order_acquire); }

 private:
  struct PinRec {
    uint64_t id;
    bool write;
    uint64_t generation;
    std::vector<uint64_t> waiters;  // waiters this pin holds up
  };
  void ReleasePin(Region* r, uint64_t id);
  Verdict FindRemoteLocked(uint64_t start, uint64_t length, uint64_t incarnation, const std::shared_ptr<Region>** out) const;
  const std::shared_ptr<Region>* FindLocalLocked(uint64_t start, uint64_t length) const;
  Pin MakePinLocked(const std::shared_ptr<Region>& r, bool write, uint64_t generation);
  void RetireLocked(Region* r);

  WaiterDone done_;
  UniqueFd gen_fd_;
  std::atomic<uint64_t>* gen_ = nullptr;
  std::atomic<uint64_t> gen_fallback_{0};
  mutable std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<Region>> regions_;  // start -> region (overlaps allowed)
  std::unordered_map<uint64_t, size_t> waiting_;         // waiter -> pins it still waits for
  uint64_t next_pin_ = 1;
};

}  // namespace kvstore
