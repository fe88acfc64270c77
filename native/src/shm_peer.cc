// ShmPeer (see shm_peer.h).
#include "shm_peer.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "native_error.h"
#include "shm_wire.h"
#include "socket_io.h"

namespace kvstore {

std::unique_ptr<ShmPeer> ShmPeer::Connect(const std::string& endpoint, int timeout_ms) {
  const std::string name = ShmControlName(endpoint);
  struct sockaddr_un addr {};
  if (name.size() > sizeof(addr.sun_path)) return nullptr;
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return nullptr;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) return nullptr;
  if (timeout_ms > 0) SetSocketTimeout(fd.get(), timeout_ms);
  std::unique_ptr<ShmPeer> peer(new ShmPeer(endpoint, std::move(fd)));
  ShmPeer* raw = peer.get();
  peer->watcher_ = std::thread([raw] { raw->Watch(); });
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

ShmPeer::~ShmPeer() {
  ::shutdown(ctrl_.get(), SHUT_RDWR);  // wakes the watcher (POLLHUP) before ctrl_ closes
  if (watcher_.joinable()) watcher_.join();
  for (auto& g : grants_) if (g.map_addr) ::munmap(g.map_addr, g.map_len);
  if (peer_generation_) ::munmap(const_cast<std::atomic<uint64_t>*>(peer_generation_), 4096);
}

// Maps page-table entries, in one pass, for the pages the peer already holds (its segment is
// prefaulted by default): a first write through a fresh shared mapping otherwise takes one fault
// per 4 KiB page (~1.5 ms per 4 MiB here, three times a bulk populate). Pages the peer never
// touched are left alone so that no memory is allocated on its behalf; mappings above
// kPopulateMaxBytes stay lazy (their page tables would cost 2 MiB per GiB in this process).
void ShmPeer::PopulateResident(void* map, size_t length) {
  constexpr size_t kPopulateMaxBytes = size_t{32} << 30;
  constexpr int kMadvPopulateRead = 22;  // MADV_POPULATE_READ, Linux 5.14+; older kernels: EINVAL, ignored
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (length == 0 || length > kPopulateMaxBytes || page == 0) return;
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

void ShmPeer::DropStaleGrants() {
  if (!peer_generation_) return;
  const uint64_t now = peer_generation_->load(std::memory_order_acquire);
  for (auto it = grants_.begin(); it != grants_.end();) {
    if (it->generation != now) {
      if (it->map_addr) ::munmap(it->map_addr, it->map_len);
      it = grants_.erase(it);
    } else {
      ++it;
    }
  }
}

void ShmPeer::Shutdown() { ::shutdown(ctrl_.get(), SHUT_RDWR); }

bool ShmPeer::Alive() {
  struct pollfd p { ctrl_.get(), POLLRDHUP, 0 };
  int n = ::poll(&p, 1, 0);
  return !(n > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)));
}

bool ShmPeer::FindGrantLocked(uint64_t address, uint64_t length, char** out) {
  DropStaleGrants();
  for (const auto& g : grants_) {
    if (address >= g.region_start && address + length <= g.region_start + g.region_length) {
      *out = g.local_region ? g.local_region + (address - g.region_start) : nullptr;
      return true;
    }
  }
  return false;
}

char* ShmPeer::ResolveCached(uint64_t address, uint64_t length) {
  std::lock_guard<std::mutex> lk(mu_);
  char* at = nullptr;
  FindGrantLocked(address, length, &at);
  return at;
}

char* ShmPeer::Resolve(uint64_t address, uint64_t length) {
  std::unique_lock<std::mutex> lk(mu_);
  char* cached = nullptr;
  if (FindGrantLocked(address, length, &cached)) return cached;
  ShmRequest req{kShmRequestMagic, 0, address, length};
  int err = 0;
  IoStatus st = SendAll(ctrl_.get(), &req, sizeof req, &err);
  if (st != IoStatus::kOk) throw NativeError("TRANSFER_FAILED", "shm control request to " + endpoint_ + " failed");
  ShmResponse resp{};
  struct iovec iov { &resp, sizeof resp };
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do n = ::recvmsg(ctrl_.get(), &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL); while (n < 0 && errno == EINTR);
  UniqueFd fd, gen_fd;
  for (struct cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      int fds[2] = {-1, -1};
      std::memcpy(fds, CMSG_DATA(cm), std::min<size_t>(count, 2) * sizeof(int));
      fd.reset(fds[0]);
      gen_fd.reset(fds[1]);
    }
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    throw NativeError("TIMEOUT", "peer " + endpoint_ + " did not answer the shm control request in time");
  }
  if (n != static_cast<ssize_t>(sizeof resp) || resp.magic != kShmResponseMagic) {
    throw NativeError("TRANSFER_FAILED", "shm control connection to " + endpoint_ + " closed or garbled");
  }
  if (resp.status == static_cast<int32_t>(ShmStatus::kOutOfRange)) {
    throw NativeError("ADDRESS_OUT_OF_RANGE", "peer " + endpoint_ + " refused remote range [" + std::to_string(address) +
                                                  ", +" + std::to_string(length) + "): outside its registered regions");
  }
  Grant g{resp.region_start, resp.region_length, nullptr, nullptr, 0, resp.generation};
  if (!peer_generation_ && gen_fd.valid()) {
    void* p = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, gen_fd.get(), 0);
    if (p != MAP_FAILED) peer_generation_ = static_cast<const std::atomic<uint64_t>*>(p);
  }
  if (!peer_generation_) {
    // Without the generation page a grant could not be revoked: not shareable then.
    grants_.push_back(g);
    return nullptr;
  }
  if (resp.status != static_cast<int32_t>(ShmStatus::kOk)) g.generation = peer_generation_->load(std::memory_order_acquire);
  if (resp.status == static_cast<int32_t>(ShmStatus::kOk) && fd.valid()) {
    void* p = ::mmap(nullptr, resp.map_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), static_cast<off_t>(resp.file_offset));
    if (p != MAP_FAILED) {
      g.map_addr = p;
      g.map_len = resp.map_length;
      g.local_region = static_cast<char*>(p) + (resp.region_start - resp.map_base);
    }
  }
  grants_.push_back(g);
  char* out = g.local_region ? g.local_region + (address - g.region_start) : nullptr;
  // Outside the lock: inline transfers (ResolveCached on the JS thread) must not wait for it. A
  // concurrent revocation unmapping it meanwhile only makes madvise fail.
  lk.unlock();
  if (g.map_addr) PopulateResident(g.map_addr, g.map_len);
  return out;
}

}  // namespace kvstore
