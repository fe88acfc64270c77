// ShmControlServer (see shm_server.h).
#include "shm_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "native_error.h"
#include "shareable_registry.h"
#include "shm_wire.h"
#include "socket_io.h"

namespace kvstore {

bool ShmControlServer::Start(const std::string& endpoint) {
  endpoint_ = endpoint;
  auth_.engine = endpoint;
  const std::string name = ShmControlName(endpoint);
  struct sockaddr_un addr {};
  if (name.size() > sizeof(addr.sun_path)) return false;
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd.get(), 64) != 0) return false;
  try {
    listener_.Start(std::move(fd));
  } catch (const NativeError&) {
    return false;  // no thread for it: same-host peers use TCP
  }
  return true;
}

void ShmControlServer::Stop() { listener_.Stop(); }

bool ShmControlServer::Trusted(int fd) {
  PeerCredentials cred;
  const bool known = ReadPeerCredentials(fd, &cred);
  if (known && PeerUidAllowed(cred.uid, peer_uids_)) return true;
  EngineCounters::Bump(counters_->shm_peers_refused);
  const std::string who = known ? "pid " + std::to_string(cred.pid) + " uid " + std::to_string(cred.uid) : "a peer of unknown uid";
  // One write, so concurrent lines do not interleave; off the JS thread, so no napi (stderr only).
  const std::string line = "kvstore engine " + endpoint_ + ": same-host peer " + who + " refused memory fds (allowed uids: " +
                           UidListText(peer_uids_) + ", MC_STORE_SHM_PEER_UIDS adds more); its transfers use TCP\n";
  std::fputs(line.c_str(), stderr);
  return false;
}

bool ShmControlServer::Authenticate(int fd) {
  const std::string who = "from " + SocketPeerText(fd);
  const ServerAuthResult r = ServeAuthHandshake(fd, auth_, kShmAuthWire, io_timeout_ms_, who);
  if (r.outcome != ServerAuthOutcome::kUnauthenticatedPeer) return r.outcome == ServerAuthOutcome::kOk;
  if (r.first_word == kShmRequestMagic) {
    // The rest of its request, then the one answer it understands: UNAUTHENTICATED (no fd).
    const Deadline deadline = DeadlineIn(auth_.timeout_ms);
    ShmRequest req;
    int err = 0;
    if (RecvAllBy(fd, reinterpret_cast<char*>(&req) + 4, sizeof req - 4, deadline, &err) == IoStatus::kOk) {
      ShmResponse resp{};
      resp.magic = kShmResponseMagic;
      resp.status = static_cast<int32_t>(ShmStatus::kUnauthenticated);
      // Counted before the peer hears the refusal: one that reads our counters next must see it.
      CountAuthRefusal(auth_, kShmAuthWire, who, "a request without authentication (the peer has no authSecret)");
      SendAllBy(fd, &resp, sizeof resp, deadline, &err);
    } else {
      CountAuthRefusal(auth_, kShmAuthWire, who, "a request without authentication (the peer has no authSecret)");
    }
  } else {
    CountAuthRefusal(auth_, kShmAuthWire, who, "not an authentication hello (not this protocol, or an older version)");
  }
  return false;
}

void ShmControlServer::Serve(int fd) {
  int err = 0;
  if (auth_.enabled() && !Authenticate(fd)) return;
  const bool trusted = Trusted(fd);
  for (;;) {
    // The first byte may take forever (no idle limit); the rest of the request ioTimeoutMs.
    ShmRequest req;
    char* raw = reinterpret_cast<char*>(&req);
    size_t got = 0;
    if (RecvSomeBy(fd, raw, sizeof req, Deadline::max(), &got, &err) != IoStatus::kOk) break;
    const Deadline deadline = DeadlineIn(io_timeout_ms_);
    // The magic as soon as it is in: a hello (4 bytes) must not wait for a whole request.
    IoStatus st = got >= 4 ? IoStatus::kOk : RecvAllBy(fd, raw + got, 4 - got, deadline, &err);
    if (st == IoStatus::kOk && got < 4) got = 4;
    if (st == IoStatus::kOk && req.magic == kShmAuthHelloMagic && !auth_.enabled()) {
      CountAuthRefusal(auth_, kShmAuthWire, "from " + SocketPeerText(fd), "it asks for authentication and this engine has no authSecret");
      SendAuthRefusal(fd, kShmAuthWire, deadline);
      break;
    }
    if (st == IoStatus::kOk) st = RecvAllBy(fd, raw + got, sizeof req - got, deadline, &err);
    if (st == IoStatus::kTimeout) EngineCounters::Bump(counters_->closed_io_timeout);
    if (st != IoStatus::kOk) break;
    if (req.magic != kShmRequestMagic) {
      EngineCounters::Bump(counters_->bad_requests);
      break;
    }
    ShmResponse resp{};
    resp.magic = kShmResponseMagic;
    RegionTable::Served served;
    ShareableMapping m;
    bool have_fd = false;
    if (!regions_->FindServed(req.address, req.length, &served)) {
      resp.status = static_cast<int32_t>(ShmStatus::kOutOfRange);
    } else {
      resp.region_start = served.start;
      resp.region_length = served.size;
      resp.incarnation = served.incarnation;
      resp.generation = regions_->generation();
      if (!trusted || regions_->generation_fd() < 0 || !served.shareable || !LookupShareable(served.start, served.size, &m)) {
        resp.status = static_cast<int32_t>(ShmStatus::kNotShareable);
      } else {
        resp.status = static_cast<int32_t>(ShmStatus::kOk);
        resp.map_base = m.map_base;
        resp.map_length = m.map_len;
        resp.file_offset = m.file_offset;
        have_fd = true;
      }
    }
    struct iovec iov { &resp, sizeof resp };
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(struct cmsghdr) char control[CMSG_SPACE(kShmGrantFds * sizeof(int))] = {};
    if (have_fd) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(kShmGrantFds * sizeof(int));
      int fds[kShmGrantFds] = {m.fd.get(), regions_->generation_fd(), served.fence_fd.get()};
      std::memcpy(CMSG_DATA(cm), fds, sizeof fds);
    }
    // One small message: it goes whole or not at all; a peer that does not read it in time is cut off.
    ssize_t n;
    for (;;) {
      n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) break;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        struct pollfd p { fd, POLLOUT, 0 };
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) == 0) {
          EngineCounters::Bump(counters_->closed_io_timeout);
          return;
        }
      }
    }
    if (n != static_cast<ssize_t>(sizeof resp)) break;
  }
}

}  // namespace kvstore
