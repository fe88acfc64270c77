// ShmControlServer (see shm_server.h).
#include "shm_server.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "shareable_registry.h"
#include "shm_wire.h"
#include "socket_io.h"

namespace kvstore {

bool ShmControlServer::Start(const std::string& endpoint) {
  const std::string name = ShmControlName(endpoint);
  struct sockaddr_un addr {};
  if (name.size() > sizeof(addr.sun_path)) return false;
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd.get(), 64) != 0) return false;
  listen_fd_ = std::move(fd);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return true;
}

void ShmControlServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (listen_fd_.valid()) ::shutdown(listen_fd_.get(), SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<std::unique_ptr<Conn>> conns;
  {
    std::lock_guard<std::mutex> lk(mu_);
    conns.swap(conns_);
  }
  for (auto& c : conns) ::shutdown(c->fd.get(), SHUT_RDWR);
  for (auto& c : conns) if (c->thread.joinable()) c->thread.join();
  listen_fd_.reset();
}

void ShmControlServer::AcceptLoop() {
  while (!stopping_.load()) {
    int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (stopping_.load()) break;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // out of fds: back off, do not spin
        continue;
      }
      break;
    }
    auto conn = std::make_unique<Conn>();
    conn->fd.reset(fd);
    Conn* raw = conn.get();
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if ((*it)->done.load()) {
        (*it)->thread.join();
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
    if (stopping_.load()) break;
    conns_.push_back(std::move(conn));
    raw->thread = std::thread([this, raw] {
      try {
        Serve(raw);
      } catch (...) {  // never let an exception end the process from an I/O thread
        ::shutdown(raw->fd.get(), SHUT_RDWR);
        raw->done.store(true);
      }
    });
  }
}

void ShmControlServer::Serve(Conn* c) {
  const int fd = c->fd.get();
  int err = 0;
  for (;;) {
    ShmRequest req;
    if (RecvAll(fd, &req, sizeof req, &err, true) != IoStatus::kOk || req.magic != kShmRequestMagic) break;
    ShmResponse resp{};
    resp.magic = kShmResponseMagic;
    ShareableMapping m;
    bool have_fd = false;
    {
      auto lock = regions_->Lock();
      if (!regions_->FindLocked(req.address, req.length, &resp.region_start, &resp.region_length)) {
        resp.status = static_cast<int32_t>(ShmStatus::kOutOfRange);
      } else if (regions_->generation_fd() < 0 || !LookupShareable(resp.region_start, resp.region_length, &m)) {
        resp.status = static_cast<int32_t>(ShmStatus::kNotShareable);
      } else {
        resp.status = static_cast<int32_t>(ShmStatus::kOk);
        resp.map_base = m.map_base;
        resp.map_length = m.map_len;
        resp.file_offset = m.file_offset;
        resp.generation = regions_->generation();
        have_fd = true;
      }
    }
    struct iovec iov { &resp, sizeof resp };
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(struct cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
    if (have_fd) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
      int fds[2] = {m.fd.get(), regions_->generation_fd()};
      std::memcpy(CMSG_DATA(cm), fds, sizeof fds);
    }
    ssize_t n;
    do n = ::sendmsg(fd, &msg, MSG_NOSIGNAL); while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(sizeof resp)) break;
  }
  ::shutdown(fd, SHUT_RDWR);
  c->done.store(true);
}

}  // namespace kvstore
