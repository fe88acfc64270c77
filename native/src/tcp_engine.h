// The transfer engine: a RegionTable, a TcpServer serving it, and one PeerChannel per remote
// endpoint. Submit() validates local ranges, splits ops into chunks and queues them; the
// completion callback runs on an I/O thread once per batch.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "region_table.h"
#include "socket_io.h"
#include "tcp_peer.h"
#include "shm_server.h"
#include "tcp_server.h"
#include "transfer_batch.h"

namespace kvstore {

struct EngineOptions {
  std::string host = "127.0.0.1";
  int connections_per_peer = 4;
  uint64_t chunk_size = 1 << 20;
  SocketTuning tuning;
  bool memcpy_local = false;
  bool shm_transport = false;  // same-host peers through shared mappings (MC_STORE_SHM_TRANSPORT)
};

struct TransferOpSpec {
  uint16_t op;  // WireOp
  std::string endpoint;
  uint64_t remote;
  uint64_t local;
  uint64_t length;
};

class TcpEngine {
 public:
  TcpEngine(EngineOptions opts, BatchDone done);
  ~TcpEngine() { Stop(); }
  std::string Start(int min_port, int max_port, int start_offset);
  const std::string& endpoint() const { return endpoint_; }
  void RegisterRegion(uint64_t address, uint64_t size) { regions_.Register(address, size); }
  bool UnregisterRegion(uint64_t address) { return regions_.Unregister(address); }
  // Throws NativeError (ADDRESS_OUT_OF_RANGE for a local range, INVALID_ARGUMENT) before any
  // byte moves. Returns true when the batch finished inline (small memcpyLocal batches: the
  // caller reads batch->error_code, no callback); otherwise `batch` completes through the
  // callback (possibly before returning).
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
  // against our regions) or a same-host peer whose grant covering the range is cached and which
  // has not hung up. False (nothing copied) otherwise: Submit() then takes the op, asks for
  // grants and reports errors. JS thread only (like Submit, the only creator of peers).
  bool ReadInline(int peer, uint64_t remote, char* dst, uint64_t length);
  void Stop();

 private:
  PeerChannel* Peer(const std::string& endpoint);
  void MemcpyInline(const std::vector<TransferOpSpec>& ops, Batch* batch);

  EngineOptions opts_;
  BatchDone done_;
  RegionTable regions_;
  TcpServer server_;
  ShmControlServer shm_server_{&regions_};
  std::string endpoint_;
  std::mutex mu_;
  bool stopped_ = false;
  std::map<std::string, std::unique_ptr<PeerChannel>> peers_;
  std::vector<PeerChannel*> peer_list_;  // by PeerIndex; appended by Peer(), cleared by Stop()
};

}  // namespace kvstore
