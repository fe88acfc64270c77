// ConnectionListener (see connection_listener.h).
#include "connection_listener.h"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>

namespace kvstore {

void ConnectionListener::Start(UniqueFd listen_fd) {
  listen_fd_ = std::move(listen_fd);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

void ConnectionListener::Stop() {
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

void ConnectionListener::AcceptLoop() {
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
    if (on_accept_) on_accept_(fd);
    Conn* raw = conn.get();
    std::lock_guard<std::mutex> lk(mu_);
    ReapFinishedLocked();
    if (stopping_.load()) break;  // conn (and its fd) dropped here
    conns_.push_back(std::move(conn));
    raw->thread = std::thread([this, raw] {
      try {
        serve_(raw->fd.get());
      } catch (...) {  // never let an exception end the process from an I/O thread
      }
      ::shutdown(raw->fd.get(), SHUT_RDWR);
      raw->done.store(true);
    });
  }
}

}  // namespace kvstore
