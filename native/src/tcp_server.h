// The serving side of the TCP transport: one listener per engine and one thread per accepted
// connection. Each request is range-checked against the RegionTable before any byte moves;
// the thread then recv()s straight into (WRITE) or send()s straight from (READ) the region.
#pragma once
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "region_table.h"
#include "socket_io.h"
#include "unique_fd.h"

namespace kvstore {

class TcpServer {
 public:
  TcpServer(RegionTable* regions, SocketTuning tuning) : regions_(regions), tuning_(tuning) {}
  ~TcpServer() { Stop(); }
  // Binds the first free port in [min_port, max_port], trying from min_port + start_offset and
  // wrapping. Returns the bound port. Throws NativeError CONNECTION_FAILED.
  int Start(const std::string& host, int min_port, int max_port, int start_offset);
  void Stop();

 private:
  struct Conn {
    UniqueFd fd;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void AcceptLoop();
  void Serve(Conn* conn);
  void ReapFinished();

  RegionTable* regions_;
  SocketTuning tuning_;
  UniqueFd listen_fd_;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::list<std::unique_ptr<Conn>> conns_;
};

}  // namespace kvstore
