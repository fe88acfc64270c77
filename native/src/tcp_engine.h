// The transfer engine: a RegionTable, a TcpServer and a ShmControlServer serving it under one
// ConnectionGate, and one PeerChannel per remote endpoint. Submit() validates local ranges, pins
// them for the batch, splits ops into chunks and queues them; the completion callback runs on an
// I/O thread once per batch. Unregister and setFence never block: they report through the
// RegionTable's waiter callback when the bytes they must wait for have moved.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "auth_handshake.h"
#include "connection_gate.h"
#include "engine_counters.h"
#include "region_table.h"
#include "shm_server.h"
#include "socket_io.h"
#include "tcp_peer.h"
#include "tcp_server.h"
#include "transfer_batch.h"

namespace kvstore {

struct EngineOptions {
  std::string host = "127.0.0.1";
  int connections_per_peer = 4;
  uint64_t chunk_size = 1 << 20;
  SocketTuning tuning;
  ServeLimits limits;                    // ioTimeoutMs, idleTimeoutMs of the serving side
  size_t max_connections = 1024;         // served connections open at once (TCP + shm control)
  size_t max_connections_per_peer = 64;  // from one IP address (TCP) or process (shm control)
  bool memcpy_local = false;
  bool shm_transport = false;  // same-host peers through shared mappings (MC_STORE_SHM_TRANSPORT)
  bool shm_only = false;       // never TCP: a chunk no shm grant covers fails (a dummy client's reader)
  std::vector<uint32_t> shm_peer_uids;  // uids given our memory fds; empty: our effective uid and root
  std::shared_ptr<const AuthKey> auth_key;  // the cluster secret; null: no handshake (auth_handshake.h)
  int auth_timeout_ms = 10000;              // the whole handshake of one connection
};

struct TransferOpSpec {
  uint16_t op;  // WireOp
  std::string endpoint;
  uint64_t remote;
  uint64_t local;
  uint64_t length;
  uint64_t incarnation = 0;  // expected incarnation of the remote region (0: not checked)
  uint64_t generation = 0;   // WRITE: the placement's generation (0: none)
  bool checksum = false;     // compute the CRC-32C of the op's bytes (batch->checksums)
};

class TcpEngine {
 public:
  TcpEngine(EngineOptions opts, BatchDone done, RegionTable::WaiterDone waiter_done);
  ~TcpEngine() { Stop(); }
  std::string Start(int min_port, int max_port, int start_offset);
  const std::string& endpoint() const { return endpoint_; }
  // Returns the region's incarnation.
  uint64_t RegisterRegion(uint64_t address, uint64_t size, bool serve) { return regions_.Register(address, size, serve); }
  bool UnregisterRegion(uint64_t address, uint64_t waiter, bool* pending) { return regions_.Unregister(address, waiter, pending); }
  bool SetFence(uint64_t address, const WriteFence& fence, uint64_t waiter, bool* pending) {
    return regions_.SetFence(address, fence, waiter, pending);
  }
  const EngineCounters& counters() const { return counters_; }
  // Throws NativeError (ADDRESS_OUT_OF_RANGE for a local range, INVALID_ARGUMENT, TRANSFER_FAILED
  // when no I/O thread can be started) before any byte moves. Returns true when the batch
  // finished inline (small memcpyLocal and same-host batches: the caller reads
  // batch->error_code, no callback); otherwise `batch` completes through the callback (possibly
  // before returning). Either way, once complete without error, batch->checksums holds the CRC of
  // every op that asked (`checksum`), and a failed batch's failed_endpoints the peers to blame.
  bool Submit(const std::vector<TransferOpSpec>& ops, std::shared_ptr<Batch> batch);
  // memcpyLocal batches, and same-host shm batches whose grants are cached, up to this many
  // bytes run on the calling thread: a thread hand-off costs more than copying them.
  static constexpr uint64_t kInlineMemcpyMax = 64 * 1024;
  // The inline read path names a peer by a small index (no string per read). PeerIndex: the
  // index of a peer this engine already created (kOwnEndpoint for our own endpoint under
  // memcpyLocal), or -1 (none yet: transfer() creates it). Never creates a peer, never blocks.
  static constexpr int kOwnEndpoint = -2;
  int PeerIndex(const std::string& endpoint);
  // One small READ finished on the calling thread straight into `dst` (any memory the caller
  // holds: nothing is queued, so it needs no registration): own endpoint (remote range checked
  // against our served regions) or a same-host peer whose grant covering the range is cached and
  // which has not hung up, in both cases with the expected incarnation (0: any). False (nothing
  // copied) otherwise: Submit() then takes the op, asks for grants and reports errors. With `crc`,
  // the copy is fused with the CRC-32C of the bytes copied, stored there. JS thread only (like
  // Submit, the only creator of peers).
  bool ReadInline(int peer, uint64_t remote, char* dst, uint64_t length, uint64_t incarnation, uint32_t* crc = nullptr);
  void Stop();

 private:
  PeerChannel* Peer(const std::string& endpoint);
  void MemcpyInline(const std::vector<TransferOpSpec>& ops, Batch* batch);

  EngineOptions opts_;
  BatchDone done_;
  EngineCounters counters_;
  AuthConfig auth_;  // key, deadline, counters; copied into the servers and each peer channel
  ConnectionGate gate_;
  RegionTable regions_;
  TcpServer server_;
  ShmControlServer shm_server_;
  std::string endpoint_;
  std::mutex mu_;
  bool stopped_ = false;
  std::map<std::string, std::unique_ptr<PeerChannel>> peers_;
  std::vector<PeerChannel*> peer_list_;  // by PeerIndex; appended by Peer(), cleared by Stop()
};

}  // namespace kvstore
