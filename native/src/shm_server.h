// Serving side of the same-host shm transport: answers fd requests for registered, fd-backed
// ranges on an abstract Unix socket (thread per connection, like the TCP server).
#pragma once
#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "region_table.h"
#include "unique_fd.h"

namespace kvstore {

class ShmControlServer {
 public:
  explicit ShmControlServer(RegionTable* regions) : regions_(regions) {}
  ~ShmControlServer() { Stop(); }
  // False when the name is taken (then same-host peers simply use TCP).
  bool Start(const std::string& endpoint);
  void Stop();

 private:
  struct Conn {
    UniqueFd fd;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void AcceptLoop();
  void Serve(Conn* c);

  RegionTable* regions_;
  UniqueFd listen_fd_;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::list<std::unique_ptr<Conn>> conns_;
};

}  // namespace kvstore
