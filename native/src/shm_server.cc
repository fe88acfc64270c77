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
  listener_.Start(std::move(fd));
  return true;
}

void ShmControlServer::Stop() { listener_.Stop(); }

void ShmControlServer::Serve(int fd) {
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
}

}  // namespace kvstore
