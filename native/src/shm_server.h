// Serving side of the same-host shm transport: answers fd requests for registered, fd-backed
// ranges on an abstract Unix socket (thread per connection, like the TCP server).
#pragma once
#include <string>

#include "connection_listener.h"
#include "region_table.h"
#include "unique_fd.h"

namespace kvstore {

class ShmControlServer {
 public:
  explicit ShmControlServer(RegionTable* regions) : regions_(regions) {}
  // False when the name is taken (then same-host peers simply use TCP).
  bool Start(const std::string& endpoint);
  void Stop();

 private:
  void Serve(int fd);

  RegionTable* regions_;
  ConnectionListener listener_{[this](int fd) { Serve(fd); }};
};

}  // namespace kvstore
