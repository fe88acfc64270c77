// The sending side for one peer endpoint: a shared chunk queue drained by N worker threads,
// each owning one pooled connection (connected lazily, reused, replaced after an error). A
// large op's chunks spread over whichever connections are free, i.e. striping. The "local"
// flavour serves this engine's own endpoint with memcpy instead of sockets (MC_STORE_MEMCPY).
// Every chunk carries the incarnation it expects of the remote region and, for a WRITE, its
// placement generation; the serving side (or, over shm, the grant and fence page) checks them.
// A chunk that asked for its CRC-32C gets it where its bytes move anyway: fused into the memcpy
// (shm, local), right before its sendmsg (TCP WRITE) or right after each recv (TCP READ). A chunk
// that fails blames this endpoint in its batch unless the failure is on this side.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "auth_handshake.h"
#include "region_table.h"
#include "shm_peer.h"
#include "socket_io.h"
#include "transfer_batch.h"

namespace kvstore {

class PeerChannel {
 public:
  // local_regions != nullptr selects the memcpy flavour; shm != nullptr (a same-host peer
  // serving the shm control socket) memcpy's through the peer's mapped regions, TCP otherwise.
  // Throws NativeError TRANSFER_FAILED (having started no thread) when the workers cannot start.
  // shm_only: a chunk that cannot go through a shm grant fails (TRANSFER_FAILED) instead of
  // taking TCP.
  PeerChannel(std::string endpoint, int connections, SocketTuning tuning, RegionTable* local_regions, BatchDone* done,
              std::shared_ptr<ShmPeer> shm = nullptr, AuthConfig auth = {}, bool shm_only = false);
  ~PeerChannel() { Stop(); }
  void Submit(std::vector<Chunk>&& chunks);
  // Small same-host batches on the calling thread when every op's grant is already cached and the
  // peer is alive: false (nothing copied) otherwise. True when handled, which includes refusing
  // the whole batch (batch->Fail, nothing copied) because an op is stale or fenced. Ops with a
  // `crc` slot get the CRC of their bytes (fused copy).
  bool TryMemcpyInline(const std::vector<Chunk>& ops, Batch* batch);
  // One READ of [remote, +length) into dst on the calling thread, same conditions as above except
  // that liveness is the watcher's flag (ShmPeer::AliveHint), not a poll() per read; false also
  // when the region's incarnation is not `incarnation` (0: any). With `crc`: the CRC of the bytes
  // copied (fused copy).
  bool TryReadInline(uint64_t remote, char* dst, uint64_t length, uint64_t incarnation, uint32_t* crc = nullptr);
  void Stop();
  const std::string& endpoint() const { return endpoint_; }

 private:
  struct Worker {
    std::thread thread;
    UniqueFd conn;
    // Mirror of conn for Stop() to shut down. fd_mu orders that shutdown against the worker closing
    // or replacing conn, so Stop() can never shut down a reused descriptor number.
    std::mutex fd_mu;
    int fd = -1;
    uint64_t next_request_id = 1;
  };
  void Run(Worker* w);
  void ExecuteTcp(Worker* w, Chunk& c);
  void ExecuteMemcpy(Chunk& c);
  // True when handled over shm; false: use TCP.
  bool ExecuteShm(Chunk& c);
  // Throws STALE_REGION / FENCED for a chunk the grant's incarnation or fence page refuses.
  void CheckShmTarget(const ShmTarget& t, const Chunk& c);
  void Finish(Chunk& c);
  bool Stopping();  // close() in progress: a chunk failing now is not the peer's fault
  void DropConnection(Worker* w);

  std::string endpoint_;
  SocketTuning tuning_;
  AuthConfig auth_;
  bool shm_only_;
  RegionTable* local_regions_;
  BatchDone* done_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> queue_;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::mutex shm_mu_;
  std::shared_ptr<ShmPeer> shm_;
  bool shm_capable_ = false;  // the peer served a control socket once: reconnect after a hang-up
};

}  // namespace kvstore
