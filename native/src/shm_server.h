// Serving side of the same-host shm transport: answers fd requests for served, fd-backed ranges
// on an abstract Unix socket (thread per connection like the TCP server, under the same
// ConnectionGate). Local (serve: false) regions are never granted. Control connections have no
// idle limit: a peer holds one for its channel's life and reads a hang-up as this engine's death.
#pragma once
#include <string>

#include "connection_gate.h"
#include "connection_listener.h"
#include "region_table.h"
#include "socket_io.h"
#include "unique_fd.h"

namespace kvstore {

class ShmControlServer {
 public:
  ShmControlServer(RegionTable* regions, int io_timeout_ms, ConnectionGate* gate)
      : regions_(regions), io_timeout_ms_(io_timeout_ms > 0 ? io_timeout_ms : 1 << 30), counters_(gate->counters()) {
    listener_.SetGate(gate);
  }
  // False when the name is taken (then same-host peers simply use TCP).
  bool Start(const std::string& endpoint);
  void Stop();

 private:
  void Serve(int fd);

  RegionTable* regions_;
  int io_timeout_ms_;
  EngineCounters* counters_;
  // SO_RCVTIMEO = ioTimeoutMs: how often a blocked read checks its deadline.
  ConnectionListener listener_{[this](int fd) { Serve(fd); }, [this](int fd) { SetSocketTimeout(fd, io_timeout_ms_); }};
};

}  // namespace kvstore
