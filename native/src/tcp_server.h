// The serving side of the TCP transport: one listener per engine and one thread per accepted
// connection (capped by the engine's ConnectionGate). Each request pins its region under the
// RegionTable's short lock after the range, incarnation and fence checks, and the thread then
// recv()s straight into (WRITE) or send()s straight from (READ) the region holding no lock (a
// region mapped from a file on a device: from the file, with sendfile()).
// Every request must finish within ioTimeoutMs of its first byte, and a connection with no
// request for idleTimeoutMs is closed. With the cluster secret, a connection first passes the
// handshake (auth_handshake.h) on its own thread; a peer without the secret is answered
// UNAUTHENTICATED and closed, and so is a peer asking for the handshake of an engine without one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "auth_handshake.h"
#include "connection_gate.h"
#include "connection_listener.h"
#include "region_table.h"
#include "socket_io.h"
#include "unique_fd.h"
#include "wire.h"

namespace kvstore {

struct ServeLimits {
  int io_timeout_ms = 10000;     // a request (header, payload, reply) must finish within this
  int idle_timeout_ms = 120000;  // a connection with no request for this long is closed; 0 = never
};

class TcpServer {
 public:
  TcpServer(RegionTable* regions, SocketTuning tuning, ServeLimits limits, ConnectionGate* gate, AuthConfig auth);
  // Binds the first free port in [min_port, max_port], trying from min_port + start_offset and
  // wrapping. Returns the bound port. Throws NativeError CONNECTION_FAILED.
  int Start(const std::string& host, int min_port, int max_port, int start_offset);
  void Stop();

 private:
  void Serve(int fd);
  // The handshake on a fresh connection; false when it must close (refused, counted, logged).
  bool Authenticate(int fd);
  // A peer without the secret sent a request (its magic already read): answer it UNAUTHENTICATED.
  void RefuseRequest(int fd, uint32_t magic);
  // One request; false when the connection must close.
  bool ServeRequest(int fd, std::vector<char>* scratch);
  // A READ's reply (header, then the bytes) from a paged file; from the mapping when the file
  // cannot be spliced. A read error (EIO, a file shorter than the region) is counted.
  IoStatus SendFromFile(int fd, const ResponseHeader& resp, const PagedFile& file, uint64_t offset, const char* mapped,
                        uint64_t len, Deadline deadline, int* err);
  // A request cut off by its deadline is counted (the connection then closes).
  void CountFailure(IoStatus st);

  RegionTable* regions_;
  SocketTuning tuning_;  // its timeout (SO_RCVTIMEO) is how often a blocked read checks its deadline
  ServeLimits limits_;
  EngineCounters* counters_;
  AuthConfig auth_;  // its engine label is set by Start, before the first connection
  ConnectionListener listener_{[this](int fd) { Serve(fd); }, [this](int fd) { TuneSocket(fd, tuning_); }};
};

}  // namespace kvstore
