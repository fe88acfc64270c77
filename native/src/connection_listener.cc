// ConnectionListener (see connection_listener.h).
#include "connection_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <system_error>

#include "native_error.h"

namespace kvstore {

namespace {

// The per-peer key of a connection: the IP address for TCP, the process id for a Unix socket.
std::string PeerKey(int fd, const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr, text, sizeof text);
    return text;
  }
  if (addr.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr, text, sizeof text);
    return text;
  }
  struct ucred cred {};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) return "pid:" + std::to_string(cred.pid);
  return "unix";
}

}  // namespace

void ConnectionListener::Start(UniqueFd listen_fd) {
  listen_fd_ = std::move(listen_fd);
  spare_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  try {
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  } catch (const std::system_error& e) {
    listen_fd_.reset();
    throw NativeError("TRANSFER_FAILED", std::string("could not start the accept thread: ") + e.what());
  }
}

void ConnectionListener::Stop() {
  if (stopping_.exchange(true)) return;
  if (listen_fd_.valid()) ::shutdown(listen_fd_.get(), SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<std::unique_ptr<Conn>> conns;
  {
    // Under mu_: a connection thread closes its own fd under mu_ too, so no number is reused here.
    std::lock_guard<std::mutex> lk(mu_);
    conns.swap(conns_);
    for (auto& c : conns) if (c->fd.valid()) ::shutdown(c->fd.get(), SHUT_RDWR);
  }
  for (auto& c : conns) if (c->thread.joinable()) c->thread.join();
  listen_fd_.reset();
}

void ConnectionListener::ReapFinishedLocked() {
  for (auto it = conns_.begin(); it != conns_.end();) {
    if ((*it)->done.load()) {
      if ((*it)->thread.joinable()) (*it)->thread.join();
      it = conns_.erase(it);
    } else {
      ++it;
    }
  }
}

void ConnectionListener::NoResources() {
  if (gate_) EngineCounters::Bump(gate_->counters()->refused_no_resources);
}

bool ConnectionListener::RefuseWithSpare() {
  // accept() fails with EMFILE whether or not a connection waits: give up the spare only for one
  // that is there (a blocking accept would otherwise eat the next connection, even one arriving
  // after descriptors came back).
  struct pollfd p { listen_fd_.get(), POLLIN, 0 };
  if (!spare_.valid() || ::poll(&p, 1, 0) != 1 || !(p.revents & POLLIN)) return false;
  spare_.reset();
  const int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) ::close(fd);
  spare_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return false;
  NoResources();
  return true;
}

void ConnectionListener::AcceptLoop() {
  int backoff_ms = 0;
  while (!stopping_.load()) {
    sockaddr_storage addr {};
    socklen_t len = sizeof addr;
    const int fd = ::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      if (stopping_.load()) break;
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        if ((err == EMFILE || err == ENFILE) && RefuseWithSpare()) continue;
        // Nothing to refuse, or nothing to refuse it with: wait for a connection or for the
        // resources to come back (checked again after the backoff), never spin.
        backoff_ms = backoff_ms == 0 ? 5 : std::min(backoff_ms * 2, 200);
        struct pollfd p { listen_fd_.get(), POLLIN, 0 };
        ::poll(&p, 1, backoff_ms);
        continue;
      }
      break;
    }
    backoff_ms = 0;
    try {
      Admit(UniqueFd(fd), addr);
    } catch (...) {  // out of memory for the bookkeeping: that connection is closed, serving goes on
      NoResources();
    }
  }
}

void ConnectionListener::Admit(UniqueFd fd, const sockaddr_storage& addr) {
  auto conn = std::make_unique<Conn>();
  conn->peer = PeerKey(fd.get(), addr);
  if (gate_ && !gate_->Admit(conn->peer)) return;  // over a cap: closed here
  conn->fd = std::move(fd);
  if (on_accept_) on_accept_(conn->fd.get());
  Conn* raw = conn.get();
  std::lock_guard<std::mutex> lk(mu_);
  ReapFinishedLocked();
  if (stopping_.load()) {
    if (gate_) gate_->Leave(raw->peer);
    return;  // conn (and its fd) dropped here
  }
  conns_.push_back(std::move(conn));
  try {
    raw->thread = std::thread([this, raw] {
      try {
        serve_(raw->fd.get());
      } catch (...) {  // never let an exception end the process from an I/O thread
      }
      if (gate_) gate_->Leave(raw->peer);
      // The fd goes now, not at the next accept: a process out of descriptors gets them back.
      std::lock_guard<std::mutex> lk(mu_);
      raw->fd.reset();
      raw->done.store(true);
    });
    if (gate_) EngineCounters::Bump(gate_->counters()->accepted);
  } catch (const std::system_error&) {
    // No thread (a pids limit, RLIMIT_NPROC, memory): refuse this connection, keep serving.
    conns_.pop_back();
    if (gate_) gate_->Leave(raw->peer);
    NoResources();
  }
}

}  // namespace kvstore
