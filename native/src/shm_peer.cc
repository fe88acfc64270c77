// ShmPeer (see shm_peer.h).
#include "shm_peer.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "native_error.h"
#include "shm_wire.h"
#include "socket_io.h"

namespace kvstore {

std::unique_ptr<ShmPeer> ShmPeer::Connect(const std::string& endpoint, int timeout_ms, AuthConfig auth) {
  const std::string name = ShmControlName(endpoint);
  struct sockaddr_un addr {};
  if (name.size() > sizeof(addr.sun_path)) return nullptr;
  // Non-blocking connect: this runs on the JS thread, and a frozen peer whose backlog is full
  // would otherwise hold it (EAGAIN then: that peer is reached over TCP).
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return nullptr;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) return nullptr;
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) return nullptr;
  if (timeout_ms > 0) SetSocketTimeout(fd.get(), timeout_ms);
  std::unique_ptr<ShmPeer> peer(new ShmPeer(endpoint, std::move(fd), timeout_ms, std::move(auth)));
  ShmPeer* raw = peer.get();
  try {
    peer->watcher_ = std::thread([raw] { raw->Watch(); });
  } catch (const std::system_error& e) {
    throw NativeError::Local("TRANSFER_FAILED", "could not start a thread to watch same-host peer " + endpoint + ": " + e.what());
  }
  return peer;
}

void ShmPeer::Watch() {
  for (;;) {
    struct pollfd p { ctrl_.get(), POLLRDHUP, 0 };
    const int n = ::poll(&p, 1, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL))) break;
  }
  hung_.store(true, std::memory_order_release);
}

GrantMapping::~GrantMapping() {
  if (addr) ::munmap(addr, len);
}

void GrantMapping::PopulateWindows(const char* p, size_t n) const {
  if (!populated || n == 0) return;
  const char* base = static_cast<const char*>(addr);
  if (p < base || p + n > base + len) return;
  const size_t first = static_cast<size_t>(p - base) / kPopulateWindow;
  const size_t last = (static_cast<size_t>(p - base) + n - 1) / kPopulateWindow;
  for (size_t w = first; w <= last && w < windows; ++w) {
    if (populated[w].load(std::memory_order_relaxed) || populated[w].exchange(true, std::memory_order_relaxed)) continue;
    const size_t at = w * kPopulateWindow;
    ShmPeer::PopulateResident(static_cast<char*>(addr) + at, std::min(kPopulateWindow, len - at));
  }
}

void GrantMapping::PopulateAll(const std::atomic<bool>& stop) const {
  if (!populated) return;
  if (const char* hold = std::getenv("KVSTORE_TEST_POPULATE_HOLD")) {
    // Test seam (native/engine-shm-populate.test.ts): start once a byte is written to this FIFO.
    UniqueFd f(::open(hold, O_RDONLY | O_CLOEXEC));
    char b;
    if (f.valid()) while (::read(f.get(), &b, 1) < 0 && errno == EINTR) {}
  }
  for (size_t w = 0; w < windows && !stop.load(std::memory_order_acquire); ++w) {
    if (populated[w].load(std::memory_order_relaxed) || populated[w].exchange(true, std::memory_order_relaxed)) continue;
    const size_t at = w * kPopulateWindow;
    ShmPeer::PopulateResident(static_cast<char*>(addr) + at, std::min(kPopulateWindow, len - at));
  }
}

void ShmPeer::PopulateInBackground(std::shared_ptr<const GrantMapping> mapping) {
  std::lock_guard<std::mutex> lk(populators_mu_);
  if (closing_.load(std::memory_order_acquire)) return;
  for (auto it = populators_.begin(); it != populators_.end();) {
    if (it->done->load(std::memory_order_acquire)) {
      it->thread.join();
      it = populators_.erase(it);
    } else {
      ++it;
    }
  }
  try {
    populators_.reserve(populators_.size() + 1);  // push_back below cannot throw with the thread running
    auto done = std::make_shared<std::atomic<bool>>(false);
    // The thread holds the mapping: a revocation meanwhile leaves it mapped until the thread ends.
    std::thread t([this, mapping, done] {
      mapping->PopulateAll(closing_);
      done->store(true, std::memory_order_release);
    });
    populators_.push_back(Populator{std::move(t), std::move(done)});
  } catch (const std::exception&) {
    // no thread: windows are filled in as chunks reach them, nothing else changes
  }
}

ShmPeer::~ShmPeer() {
  ::shutdown(ctrl_.get(), SHUT_RDWR);  // wakes the watcher (POLLHUP) before ctrl_ closes
  if (watcher_.joinable()) watcher_.join();
  closing_.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lk(populators_mu_);
    for (auto& p : populators_) p.thread.join();
    populators_.clear();
  }
  grants_.clear();
  if (peer_generation_) ::munmap(const_cast<std::atomic<uint64_t>*>(peer_generation_), 4096);
}

// Maps page-table entries, in one pass, for the pages the peer already holds (its segment is
// prefaulted by default): a first write through a fresh shared mapping otherwise takes one fault
// per 4 KiB page (~1.5 ms per 4 MiB here, three times a bulk populate). Pages the peer never
// touched are left alone so that no memory is allocated on its behalf. It costs ~0.15 ms per MiB
// held: done for the whole mapping before the grant was used, it made the first transfer to every
// peer wait for all of it (over 200 ms for a 1.5 GiB segment, seconds for tens of GiB). So it is
// done per 2 MiB window, by a thread started with the grant (ShmPeer::PopulateInBackground) and,
// for a window that thread has not reached yet, by the first I/O-thread chunk landing in it
// (GrantMapping::PopulateWindows); each window once.
void ShmPeer::PopulateResident(void* map, size_t length) {
  constexpr int kMadvPopulateRead = 22;  // MADV_POPULATE_READ, Linux 5.14+; older kernels: EINVAL, ignored
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (length == 0 || page == 0) return;
  const size_t pages = (length + page - 1) / page;
  std::vector<unsigned char> resident(pages);
  if (::mincore(map, length, resident.data()) != 0) return;
  char* base = static_cast<char*>(map);
  for (size_t i = 0; i < pages;) {
    if (!(resident[i] & 1)) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < pages && (resident[j] & 1)) ++j;
    const size_t end = std::min(j * page, length);
    if (::madvise(base + i * page, end - i * page, kMadvPopulateRead) != 0 && errno == EINVAL) return;
    i = j;
  }
}

void ShmPeer::DropStaleGrantsLocked() {
  if (!peer_generation_) return;
  const uint64_t now = peer_generation_->load(std::memory_order_acquire);
  // A dropped grant's mapping stays until the chunks holding it (ShmTarget::keep) are done.
  grants_.erase(std::remove_if(grants_.begin(), grants_.end(), [now](const Grant& g) { return g.generation != now; }), grants_.end());
}

void ShmPeer::Shutdown() { ::shutdown(ctrl_.get(), SHUT_RDWR); }

bool ShmPeer::Alive() {
  struct pollfd p { ctrl_.get(), POLLRDHUP, 0 };
  int n = ::poll(&p, 1, 0);
  return !(n > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)));
}

bool ShmPeer::FindGrantLocked(uint64_t address, uint64_t length, ShmTarget* out, bool keep) {
  DropStaleGrantsLocked();
  for (const auto& g : grants_) {
    if (address >= g.region_start && address + length <= g.region_start + g.region_length) {
      out->at = g.local_region ? g.local_region + (address - g.region_start) : nullptr;
      out->incarnation = g.incarnation;
      out->fence = g.mapping ? g.mapping->fence.get() : nullptr;
      if (keep) out->keep = g.mapping;
      return true;
    }
  }
  return false;
}

ShmTarget ShmPeer::Resolve(uint64_t address, uint64_t length) {
  ShmTarget cached;
  {
    std::lock_guard<std::mutex> lk(grants_mu_);
    if (FindGrantLocked(address, length, &cached, true)) return cached;
  }
  std::unique_lock<std::mutex> ctrl_lk(ctrl_mu_);
  {
    std::lock_guard<std::mutex> lk(grants_mu_);  // another thread may have asked meanwhile
    if (FindGrantLocked(address, length, &cached, true)) return cached;
  }
  if (auth_.enabled() && !authenticated_) {
    // Once per control connection, before its first request; a failure leaves it unusable (the
    // peer closes it) and the channel reconnects for a later chunk.
    ClientAuthHandshake(ctrl_.get(), auth_, kShmAuthWire, timeout_ms_, endpoint_);
    authenticated_ = true;
  }
  ShmRequest req{kShmRequestMagic, 0, address, length};
  int err = 0;
  IoStatus st = SendAll(ctrl_.get(), &req, sizeof req, &err);
  if (st != IoStatus::kOk) throw NativeError("TRANSFER_FAILED", "shm control request to " + endpoint_ + " failed");
  ShmResponse resp{};
  struct iovec iov { &resp, sizeof resp };
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(kShmGrantFds * sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(ctrl_.get(), &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL); while (n < 0 && errno == EINTR);
  const int recv_errno = errno;
  UniqueFd fds[kShmGrantFds];
  for (struct cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      int got[kShmGrantFds] = {-1, -1, -1};
      std::memcpy(got, CMSG_DATA(cm), std::min<size_t>(count, kShmGrantFds) * sizeof(int));
      for (int i = 0; i < kShmGrantFds; ++i) fds[i].reset(got[i]);
    }
  }
  if (n < 0 && (recv_errno == EAGAIN || recv_errno == EWOULDBLOCK)) {
    throw NativeError("TIMEOUT", "peer " + endpoint_ + " did not answer the shm control request in time");
  }
  if (n != static_cast<ssize_t>(sizeof resp) || resp.magic != kShmResponseMagic) {
    throw NativeError("TRANSFER_FAILED", "shm control connection to " + endpoint_ + " closed or garbled");
  }
  if (resp.status == static_cast<int32_t>(ShmStatus::kUnauthenticated)) {
    throw NativeError("UNAUTHENTICATED", "peer " + endpoint_ + " (transfer-shm) requires authentication and this engine has no authSecret "
                                         "(every engine of a cluster needs the same cluster secret)");
  }
  if (resp.status == static_cast<int32_t>(ShmStatus::kOutOfRange)) {
    throw NativeError("ADDRESS_OUT_OF_RANGE", "peer " + endpoint_ + " refused remote range [" + std::to_string(address) +
                                                  ", +" + std::to_string(length) + "): outside its served regions");
  }
  Grant g{resp.region_start, resp.region_length, resp.incarnation, resp.generation, nullptr, nullptr};
  if (resp.status == static_cast<int32_t>(ShmStatus::kOk) && fds[0].valid() && fds[2].valid()) {
    void* p = ::mmap(nullptr, resp.map_length, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0].get(), static_cast<off_t>(resp.file_offset));
    if (p != MAP_FAILED) {
      auto mapping = std::make_shared<GrantMapping>();
      mapping->addr = p;
      mapping->len = resp.map_length;
      mapping->windows = (resp.map_length + GrantMapping::kPopulateWindow - 1) / GrantMapping::kPopulateWindow;
      // Mappings above 32 GiB stay lazy (their page tables would cost 2 MiB per GiB in this process).
      if (resp.map_length <= (size_t{32} << 30)) mapping->populated.reset(new std::atomic<bool>[mapping->windows]());
      mapping->fence = std::make_unique<FencePageView>(fds[2].get());
      if (mapping->fence->valid()) {
        g.mapping = std::move(mapping);
        g.local_region = static_cast<char*>(p) + (resp.region_start - resp.map_base);
      }
    }
  }
  ShmTarget out;
  {
    std::lock_guard<std::mutex> lk(grants_mu_);
    if (!peer_generation_ && fds[1].valid()) {
      void* p = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fds[1].get(), 0);
      if (p != MAP_FAILED) peer_generation_ = static_cast<const std::atomic<uint64_t>*>(p);
    }
    if (!peer_generation_) {
      // Without the generation page a grant could not be revoked: not shareable then.
      g.mapping.reset();
      g.local_region = nullptr;
    }
    grants_.push_back(g);
    out.at = g.local_region ? g.local_region + (address - g.region_start) : nullptr;
    out.incarnation = g.incarnation;
    out.fence = g.mapping ? g.mapping->fence.get() : nullptr;
    out.keep = g.mapping;
  }
  ctrl_lk.unlock();
  // Off this transfer's path and outside the locks (inline transfers on the JS thread take the
  // grants lock): see PopulateResident.
  if (out.keep && out.keep->populated) PopulateInBackground(out.keep);
  return out;
}

}  // namespace kvstore
