// The serving side of the TCP transport: one listener per engine and one thread per accepted
// connection. Each request is range-checked against the RegionTable before any byte moves;
// the thread then recv()s straight into (WRITE) or send()s straight from (READ) the region.
#pragma once
#include <cstdint>
#include <string>

#include "connection_listener.h"
#include "region_table.h"
#include "socket_io.h"
#include "unique_fd.h"

namespace kvstore {

class TcpServer {
 public:
  TcpServer(RegionTable* regions, SocketTuning tuning) : regions_(regions), tuning_(tuning) {}
  // Binds the first free port in [min_port, max_port], trying from min_port + start_offset and
  // wrapping. Returns the bound port. Throws NativeError CONNECTION_FAILED.
  int Start(const std::string& host, int min_port, int max_port, int start_offset);
  void Stop();

 private:
  void Serve(int fd);

  RegionTable* regions_;
  SocketTuning tuning_;
  ConnectionListener listener_{[this](int fd) { Serve(fd); }, [this](int fd) { TuneSocket(fd, tuning_); }};
};

}  // namespace kvstore
