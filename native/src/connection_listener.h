// A listening socket served thread-per-connection: the accept loop, the set of connection
// threads (finished ones reaped on the next accept) and an orderly Stop(). The TCP transport
// and the same-host shm control socket both serve this way; each gives only its Serve function.
#pragma once
#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "unique_fd.h"

namespace kvstore {

class ConnectionListener {
 public:
  // serve(fd) runs on the connection's own thread and returns when the connection is done;
  // the listener owns and closes fd. on_accept(fd), if given, runs first (socket options).
  explicit ConnectionListener(std::function<void(int)> serve, std::function<void(int)> on_accept = {})
      : serve_(std::move(serve)), on_accept_(std::move(on_accept)) {}
  ~ConnectionListener() { Stop(); }
  ConnectionListener(const ConnectionListener&) = delete;
  ConnectionListener& operator=(const ConnectionListener&) = delete;

  // Takes a socket that is already listening and starts accepting on it.
  void Start(UniqueFd listen_fd);
  // Stops accepting, shuts every connection down and joins every thread. Idempotent.
  void Stop();

 private:
  struct Conn {
    UniqueFd fd;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void AcceptLoop();
  void ReapFinishedLocked();

  std::function<void(int)> serve_;
  std::function<void(int)> on_accept_;
  UniqueFd listen_fd_;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::list<std::unique_ptr<Conn>> conns_;
};

}  // namespace kvstore
