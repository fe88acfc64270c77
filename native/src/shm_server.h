// Serving side of the same-host shm transport: answers fd requests for served, fd-backed ranges
// on an abstract Unix socket (thread per connection like the TCP server, under the same
// ConnectionGate). Local (serve: false) regions are never granted, and fds only to a peer whose
// uid (SO_PEERCRED) is allowed (peer_credentials.h): any other peer is told "not shareable" for
// every range (so it uses TCP, like a peer on another host), counted, and logged once per
// connection on stderr. Control connections have no idle limit: a peer holds one for its
// channel's life and reads a hang-up as this engine's death. With the cluster secret a connection
// first passes the handshake (auth_handshake.h, interface "transfer-shm"): a peer without it is
// answered UNAUTHENTICATED and closed before any request is read, so it never gets an fd.
#pragma once
#include <string>
#include <vector>

#include "auth_handshake.h"
#include "connection_gate.h"
#include "connection_listener.h"
#include "peer_credentials.h"
#include "region_table.h"
#include "socket_io.h"
#include "unique_fd.h"

namespace kvstore {

class ShmControlServer {
 public:
  // peer_uids: the uids that receive fds (empty: this process's effective uid and root).
  ShmControlServer(RegionTable* regions, int io_timeout_ms, ConnectionGate* gate, std::vector<uint32_t> peer_uids, AuthConfig auth)
      : regions_(regions), io_timeout_ms_(io_timeout_ms > 0 ? io_timeout_ms : 1 << 30), counters_(gate->counters()),
        peer_uids_(std::move(peer_uids)), auth_(std::move(auth)) {
    listener_.SetGate(gate);
  }
  // False when the name is taken (then same-host peers simply use TCP).
  bool Start(const std::string& endpoint);
  void Stop();

 private:
  void Serve(int fd);
  // Whether the peer on `fd` may receive fds; logs and counts a refusal.
  bool Trusted(int fd);
  // The handshake on a fresh connection; false when it must close (refused, counted, logged).
  bool Authenticate(int fd);

  RegionTable* regions_;
  int io_timeout_ms_;
  EngineCounters* counters_;
  std::vector<uint32_t> peer_uids_;
  std::string endpoint_;  // for log lines; set by Start before any connection
  AuthConfig auth_;       // its engine label too
  // SO_RCVTIMEO = ioTimeoutMs: how often a blocked read checks its deadline.
  ConnectionListener listener_{[this](int fd) { Serve(fd); }, [this](int fd) { SetSocketTimeout(fd, io_timeout_ms_); }};
};

}  // namespace kvstore
