// A listening socket served thread-per-connection: the accept loop, the set of connection
// threads (each closes its fd as it ends; finished threads are joined on the next accept) and an
// orderly Stop(). The TCP transport
// and the same-host shm control socket both serve this way; each gives only its Serve function.
// Resource exhaustion never ends the process: a connection over the gate's caps, one that gets
// no thread, and (through a reserved spare descriptor) one that arrives while the process is out
// of fds are accepted and closed at once, counted; accept() waits (poll, backing off up to 200 ms)
// instead of spinning while nothing can be done.
#pragma once
#include <sys/socket.h>

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "connection_gate.h"
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

  // Before Start: caps and counters (none: unlimited, uncounted).
  void SetGate(ConnectionGate* gate) { gate_ = gate; }
  // Takes a socket that is already listening and starts accepting on it. Throws NativeError
  // TRANSFER_FAILED when the accept thread cannot be started.
  void Start(UniqueFd listen_fd);
  // Stops accepting, shuts every connection down and joins every thread. Idempotent.
  void Stop();

 private:
  struct Conn {
    UniqueFd fd;
    std::thread thread;
    std::string peer;
    std::atomic<bool> done{false};
  };
  void AcceptLoop();
  // One accepted fd: admitted and given a thread, or closed and counted.
  void Admit(UniqueFd fd, const sockaddr_storage& addr);
  // Out of descriptors: gives up the spare one to accept and close the waiting connection.
  bool RefuseWithSpare();
  void NoResources();
  void ReapFinishedLocked();

  std::function<void(int)> serve_;
  std::function<void(int)> on_accept_;
  ConnectionGate* gate_ = nullptr;
  UniqueFd listen_fd_;
  UniqueFd spare_;  // /dev/null, held so an EMFILE can still accept (and close) one connection
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::list<std::unique_ptr<Conn>> conns_;
};

}  // namespace kvstore
