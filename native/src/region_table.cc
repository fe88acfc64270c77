// RegionTable: registration, range/incarnation/fence checks and pins (see region_table.h).
#include "region_table.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <new>

#include "incarnation.h"
#include "shareable_registry.h"

namespace kvstore {

struct RegionTable::Region {
  uint64_t start = 0, size = 0, incarnation = 0;
  bool serve = true;
  bool shareable = false;  // served, fd-backed and with a fence page: may be granted over shm
  WriteFence fence;
  std::unique_ptr<FencePage> page;
  std::unique_ptr<PagedFile> file;  // served regions in a file whose pages may be out of memory
  std::vector<PinRec> pins;  // few: one per chunk moving bytes in the region
};

RegionTable::Pin::Pin(Pin&& o) noexcept : table_(o.table_), region_(std::move(o.region_)), id_(o.id_) { o.table_ = nullptr; }

RegionTable::Pin& RegionTable::Pin::operator=(Pin&& o) noexcept {
  if (this != &o) {
    Release();
    table_ = o.table_;
    region_ = std::move(o.region_);
    id_ = o.id_;
    o.table_ = nullptr;
  }
  return *this;
}

bool RegionTable::Pin::Covers(uint64_t start, uint64_t length) const {
  return region_ && start >= region_->start && start + length >= start && start + length <= region_->start + region_->size;
}

const PagedFile* RegionTable::Pin::file() const { return region_ ? region_->file.get() : nullptr; }

uint64_t RegionTable::Pin::FileOffset(uint64_t address) const { return region_->file->file_offset + (address - region_->start); }

void RegionTable::Pin::Release() {
  if (!table_) return;
  table_->ReleasePin(region_.get(), id_);
  table_ = nullptr;
  region_.reset();
}

RegionTable::RegionTable(WaiterDone done) : done_(std::move(done)) {
  gen_ = &gen_fallback_;
  UniqueFd fd(::memfd_create("kvstore-region-generation", MFD_CLOEXEC));
  if (fd.valid() && ::ftruncate(fd.get(), 4096) == 0) {
    void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p != MAP_FAILED) {
      gen_ = new (p) std::atomic<uint64_t>(0);
      gen_fd_ = std::move(fd);
    }
  }
}

RegionTable::~RegionTable() {
  if (gen_ != &gen_fallback_) ::munmap(gen_, 4096);
}

uint64_t RegionTable::Register(uint64_t address, uint64_t size, bool serve) {
  auto r = std::make_shared<Region>();
  r->start = address;
  r->size = size;
  r->serve = serve;
  r->incarnation = NewIncarnation();
  ShareableMapping m;
  if (serve && LookupShareable(address, size, &m)) {
    r->page = std::make_unique<FencePage>();
    r->shareable = r->page->valid();
  }
  if (serve) r->file = FindPagedFile(address, size);
  std::lock_guard<std::mutex> lk(mu_);
  auto& slot = regions_[address];
  if (slot) RetireLocked(slot.get());
  slot = r;
  return r->incarnation;
}

void RegionTable::RetireLocked(Region* r) {
  // Only fd-backed served memory is ever granted to a peer: dropping anything else (a Get's
  // result buffer registered for one read) must not revoke every peer's grants.
  if (r->shareable) gen_->fetch_add(1, std::memory_order_acq_rel);
}

bool RegionTable::Unregister(uint64_t address, uint64_t waiter, bool* pending) {
  *pending = false;
  std::lock_guard<std::mutex> lk(mu_);
  auto it = regions_.find(address);
  if (it == regions_.end()) return false;
  std::shared_ptr<Region> r = std::move(it->second);
  regions_.erase(it);
  RetireLocked(r.get());
  for (auto& p : r->pins) p.waiters.push_back(waiter);
  if (!r->pins.empty()) {
    waiting_[waiter] = r->pins.size();
    *pending = true;
  }
  return true;
}

bool RegionTable::SetFence(uint64_t address, const WriteFence& fence, uint64_t waiter, bool* pending) {
  *pending = false;
  std::lock_guard<std::mutex> lk(mu_);
  auto it = regions_.find(address);
  if (it == regions_.end() || !it->second->serve) return false;
  Region* r = it->second.get();
  r->fence = r->fence.Advanced(fence);
  if (r->page) r->page->Publish(r->fence);
  size_t held = 0;
  for (auto& p : r->pins) {
    if (p.write && r->fence.Refuses(p.generation)) {
      p.waiters.push_back(waiter);
      ++held;
    }
  }
  if (held > 0) {
    waiting_[waiter] = held;
    *pending = true;
  }
  return true;
}

RegionTable::Verdict RegionTable::FindRemoteLocked(uint64_t start, uint64_t length, uint64_t incarnation,
                                                  const std::shared_ptr<Region>** out) const {
  const uint64_t end = start + length;
  if (end < start) return Verdict::kOutOfRange;  // wraps
  bool stale = false;
  // Walk back over every region starting at or before `start` (few regions; overlaps allowed).
  for (auto it = regions_.upper_bound(start); it != regions_.begin();) {
    --it;
    const Region* r = it->second.get();
    if (!r->serve || end > r->start + r->size) continue;
    if (incarnation == 0 || r->incarnation == incarnation) {
      *out = &it->second;
      return Verdict::kOk;
    }
    stale = true;
  }
  return stale ? Verdict::kStale : Verdict::kOutOfRange;
}

const std::shared_ptr<RegionTable::Region>* RegionTable::FindLocalLocked(uint64_t start, uint64_t length) const {
  const uint64_t end = start + length;
  if (end < start) return nullptr;
  for (auto it = regions_.upper_bound(start); it != regions_.begin();) {
    --it;
    if (end <= it->second->start + it->second->size) return &it->second;
  }
  return nullptr;
}

RegionTable::Pin RegionTable::MakePinLocked(const std::shared_ptr<Region>& r, bool write, uint64_t generation) {
  Pin pin;
  pin.table_ = this;
  pin.region_ = r;
  pin.id_ = next_pin_++;
  r->pins.push_back(PinRec{pin.id_, write, generation, {}});
  return pin;
}

RegionTable::Verdict RegionTable::PinRemote(uint64_t start, uint64_t length, bool write, uint64_t incarnation, uint64_t generation,
                                            Pin* pin) {
  std::lock_guard<std::mutex> lk(mu_);
  const std::shared_ptr<Region>* r = nullptr;
  Verdict v = FindRemoteLocked(start, length, incarnation, &r);
  if (v != Verdict::kOk) return v;
  if (write && (*r)->fence.Refuses(generation)) return Verdict::kFenced;
  *pin = MakePinLocked(*r, write, generation);
  return Verdict::kOk;
}

RegionTable::Verdict RegionTable::CheckRemote(uint64_t start, uint64_t length, bool write, uint64_t incarnation,
                                              uint64_t generation) const {
  std::lock_guard<std::mutex> lk(mu_);
  const std::shared_ptr<Region>* r = nullptr;
  Verdict v = FindRemoteLocked(start, length, incarnation, &r);
  if (v != Verdict::kOk) return v;
  return write && (*r)->fence.Refuses(generation) ? Verdict::kFenced : Verdict::kOk;
}

bool RegionTable::ContainsLocal(uint64_t start, uint64_t length) const {
  std::lock_guard<std::mutex> lk(mu_);
  return FindLocalLocked(start, length) != nullptr;
}

bool RegionTable::PinLocal(uint64_t start, uint64_t length, Pin* pin) {
  std::lock_guard<std::mutex> lk(mu_);
  const std::shared_ptr<Region>* r = FindLocalLocked(start, length);
  if (!r) return false;
  *pin = MakePinLocked(*r, false, 0);
  return true;
}

bool RegionTable::FindServed(uint64_t address, uint64_t length, Served* out) const {
  std::lock_guard<std::mutex> lk(mu_);
  const std::shared_ptr<Region>* found = nullptr;
  if (FindRemoteLocked(address, length, 0, &found) != Verdict::kOk) return false;
  const Region* r = found->get();
  out->start = r->start;
  out->size = r->size;
  out->incarnation = r->incarnation;
  out->shareable = false;
  if (r->shareable) {
    // A dup, so the fd stays valid for the reply even if the region goes away meanwhile.
    out->fence_fd.reset(::fcntl(r->page->fd(), F_DUPFD_CLOEXEC, 0));
    out->shareable = out->fence_fd.valid();
  }
  return true;
}

void RegionTable::ReleasePin(Region* r, uint64_t id) {
  std::vector<uint64_t> finished;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (size_t i = 0; i < r->pins.size(); ++i) {
      if (r->pins[i].id != id) continue;
      for (uint64_t w : r->pins[i].waiters) {
        auto it = waiting_.find(w);
        if (it != waiting_.end() && --it->second == 0) {
          waiting_.erase(it);
          finished.push_back(w);
        }
      }
      if (i + 1 != r->pins.size()) r->pins[i] = std::move(r->pins.back());
      r->pins.pop_back();
      break;
    }
  }
  if (done_) for (uint64_t w : finished) done_(w);
}

}  // namespace kvstore
