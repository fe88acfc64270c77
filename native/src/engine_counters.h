// Counters of one engine's serving side (TCP listener and shm control socket together), read by
// engine.stats(). Relaxed atomics: each is a tally, none orders memory.
#pragma once
#include <atomic>
#include <cstdint>

namespace kvstore {

struct EngineCounters {
  std::atomic<uint64_t> connections_open{0};
  std::atomic<uint64_t> accepted{0};                // admitted and given a serving thread
  std::atomic<uint64_t> refused_over_cap{0};      // maxConnections / maxConnectionsPerPeer
  std::atomic<uint64_t> refused_no_resources{0};  // no thread, no fd, no memory for the connection
  std::atomic<uint64_t> closed_idle{0};           // no request for idleTimeoutMs
  std::atomic<uint64_t> closed_io_timeout{0};     // a request not finished within ioTimeoutMs
  std::atomic<uint64_t> bad_requests{0};          // not this protocol (closed) or a chunk outside its op
  std::atomic<uint64_t> stale_refused{0};         // incarnation mismatch
  std::atomic<uint64_t> fenced_refused{0};        // WRITE refused by the region's fence
  std::atomic<uint64_t> shm_peers_refused{0};     // shm control connections of a uid not allowed fds
  std::atomic<uint64_t> auth_refused{0};
  std::atomic<uint64_t> file_read_errors{0};      // READs of a paged file whose read failed (EIO, file too short): closed          // connections refused by the cluster secret's handshake (auth_handshake.h)

  static void Bump(std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }
};

}  // namespace kvstore
