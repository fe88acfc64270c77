// PeerChannel (see tcp_peer.h).
#include "tcp_peer.h"

#include <sys/socket.h>

#include <cstring>
#include <system_error>

#include "chunk_copy.h"
#include "crc32c.h"
#include "native_error.h"
#include "refusals.h"
#include "wire.h"

namespace kvstore {

PeerChannel::PeerChannel(std::string endpoint, int connections, SocketTuning tuning, RegionTable* local_regions,
                         BatchDone* done, std::shared_ptr<ShmPeer> shm, AuthConfig auth, bool shm_only)
    : endpoint_(std::move(endpoint)), tuning_(tuning), auth_(std::move(auth)), shm_only_(shm_only), local_regions_(local_regions), done_(done),
      shm_(std::move(shm)) {
  shm_capable_ = shm_ != nullptr;
  if (connections < 1) connections = 1;
  for (int i = 0; i < connections; ++i) workers_.push_back(std::make_unique<Worker>());
  for (auto& w : workers_) {
    Worker* raw = w.get();
    try {
      raw->thread = std::thread([this, raw] { Run(raw); });  // Run() catches per chunk
    } catch (const std::system_error& e) {
      // Out of threads (a pids limit): undo, so the caller can fail this batch and try again later.
      Stop();
      throw NativeError("TRANSFER_FAILED", "could not start I/O threads for peer " + endpoint_ + ": " + e.what());
    }
  }
}

void PeerChannel::Submit(std::vector<Chunk>&& chunks) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& c : chunks) queue_.push_back(std::move(c));
  }
  if (chunks.size() == 1) cv_.notify_one();
  else cv_.notify_all();
}

void PeerChannel::CheckShmTarget(const ShmTarget& t, const Chunk& c) {
  if (c.incarnation != 0 && t.incarnation != c.incarnation) ThrowStale(endpoint_, c.range_start, c.range_length, c.incarnation);
  if (c.op == static_cast<uint16_t>(WireOp::kWrite) && t.fence && t.fence->Refuses(c.generation)) {
    ThrowFenced(endpoint_, c.range_start, c.range_length, c.generation);
  }
}

bool PeerChannel::TryMemcpyInline(const std::vector<Chunk>& ops, Batch* batch) {
  if (!shm_capable_) return false;
  std::shared_ptr<ShmPeer> shm;
  {
    std::lock_guard<std::mutex> lk(shm_mu_);
    shm = shm_;
  }
  if (!shm || !shm->Alive()) return false;
  // Under the grants lock for the whole (small) copy: no revocation can unmap a grant meanwhile.
  auto lk = shm->LockGrants();
  ShmTarget one;
  std::vector<ShmTarget> many(ops.size() > 1 ? ops.size() : 0);
  ShmTarget* targets = ops.size() > 1 ? many.data() : &one;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!shm->FindCachedLocked(ops[i].range_start, ops[i].range_length, &targets[i])) return false;
  }
  // Every op is checked before any byte moves: a refused op leaves the whole batch unmoved.
  try {
    for (size_t i = 0; i < ops.size(); ++i) CheckShmTarget(targets[i], ops[i]);
  } catch (const NativeError& e) {
    batch->Fail(e.code(), e.what(), endpoint_);
    return true;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    char* remote = targets[i].at + (ops[i].remote - ops[i].range_start);
    if (ops[i].op == static_cast<uint16_t>(WireOp::kRead)) CopyChunk(ops[i].local, remote, ops[i].length, ops[i].crc);
    else CopyChunk(remote, ops[i].local, ops[i].length, ops[i].crc);
  }
  return true;
}

bool PeerChannel::TryReadInline(uint64_t remote, char* dst, uint64_t length, uint64_t incarnation, uint32_t* crc) {
  if (!shm_capable_) return false;
  std::shared_ptr<ShmPeer> shm;
  {
    std::lock_guard<std::mutex> lk(shm_mu_);
    shm = shm_;
  }
  if (!shm || !shm->AliveHint()) return false;
  auto lk = shm->LockGrants();  // held for the copy (at most 64 KiB): no revocation unmaps it meanwhile
  ShmTarget t;
  if (!shm->FindCachedLocked(remote, length, &t)) return false;
  if (incarnation != 0 && t.incarnation != incarnation) return false;
  CopyChunk(dst, t.at, length, crc);
  return true;
}

void PeerChannel::Stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) {
    std::lock_guard<std::mutex> lk(w->fd_mu);
    if (w->fd >= 0) ::shutdown(w->fd, SHUT_RDWR);
  }
  {
    std::lock_guard<std::mutex> lk(shm_mu_);
    if (shm_) shm_->Shutdown();
  }
  for (auto& w : workers_) if (w->thread.joinable()) w->thread.join();
}

bool PeerChannel::Stopping() {
  std::lock_guard<std::mutex> lk(mu_);
  return stopping_;
}

void PeerChannel::Finish(Chunk& c) {
  std::shared_ptr<Batch> b = std::move(c.batch);
  if (b->remaining.fetch_sub(1) == 1) {
    b->local_pins.clear();  // the batch's local buffers may be unregistered from now on
    b->Complete();          // every chunk's CRC slot is written: join them per op
    (*done_)(std::move(b));
  }
}

void PeerChannel::Run(Worker* w) {
  for (;;) {
    Chunk c;
    bool stopping;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stopping and drained
      c = std::move(queue_.front());
      queue_.pop_front();
      stopping = stopping_;
    }
    if (stopping) {
      c.batch->Fail("TRANSFER_FAILED", "transfer engine closed before the transfer to " + endpoint_ + " ran");
    } else if (!c.batch->failed.load()) {
      try {
        if (local_regions_) ExecuteMemcpy(c);
        else if (!shm_capable_ || !ExecuteShm(c)) {
          if (shm_only_) {
            throw NativeError("TRANSFER_FAILED", "peer " + endpoint_ +
                                                     " is not reachable through same-host shared memory (no control socket, or "
                                                     "no fds for this process) and this engine uses nothing else (shmOnly)");
          }
          ExecuteTcp(w, c);
        }
      } catch (const NativeError& e) {
        // Blame the peer unless the failure is ours (or close() cut the chunk short).
        c.batch->Fail(e.code(), e.what(), e.local() || e.code() == "INVALID_ARGUMENT" || Stopping() ? std::string() : endpoint_);
      } catch (const std::exception& e) {
        c.batch->Fail("TRANSFER_FAILED", e.what());
      } catch (...) {
        c.batch->Fail("TRANSFER_FAILED", "unknown error");
      }
    }
    Finish(c);
  }
  DropConnection(w);
}

void PeerChannel::DropConnection(Worker* w) {
  std::lock_guard<std::mutex> lk(w->fd_mu);
  w->fd = -1;
  w->conn.reset();
}

void PeerChannel::ExecuteMemcpy(Chunk& c) {
  const bool write = c.op == static_cast<uint16_t>(WireOp::kWrite);
  RegionTable::Pin pin;
  ThrowUnlessOk(local_regions_->PinRemote(c.range_start, c.range_length, write, c.incarnation, c.generation, &pin), endpoint_,
                c.range_start, c.range_length, c.incarnation, c.generation);
  char* remote = reinterpret_cast<char*>(static_cast<uintptr_t>(c.remote));
  if (write) CopyChunk(remote, c.local, c.length, c.crc, c.stream);
  else CopyChunk(c.local, remote, c.length, c.crc, c.stream);
}

bool PeerChannel::ExecuteShm(Chunk& c) {
  std::shared_ptr<ShmPeer> shm;
  {
    std::lock_guard<std::mutex> lk(shm_mu_);
    if (!shm_) shm_ = ShmPeer::Connect(endpoint_, tuning_.timeout_ms, auth_);  // the peer restarted?
    shm = shm_;
  }
  if (!shm) return false;
  if (!shm->Alive()) {
    std::lock_guard<std::mutex> lk(shm_mu_);
    if (shm_ == shm) shm_.reset();
    throw NativeError("TRANSFER_FAILED", "peer " + endpoint_ + " went away (shm control socket closed)");
  }
  const ShmTarget t = shm->Resolve(c.range_start, c.range_length);
  if (!t.at) return false;  // not fd-backed on the peer: TCP
  CheckShmTarget(t, c);
  // The window: a fence the peer installs after the check above cannot stop this memcpy.
  char* remote = t.at + (c.remote - c.range_start);
  if (t.keep) t.keep->PopulateWindows(remote, c.length);
  if (c.op == static_cast<uint16_t>(WireOp::kRead)) CopyChunk(c.local, remote, c.length, c.crc, c.stream);
  else CopyChunk(remote, c.local, c.length, c.crc, c.stream);
  return true;
}

void PeerChannel::ExecuteTcp(Worker* w, Chunk& c) {
  if (!w->conn.valid()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopping_) throw NativeError::Local("TRANSFER_FAILED", "transfer engine closed");
    }
    UniqueFd connected = ConnectEndpoint(endpoint_, tuning_);
    {
      std::lock_guard<std::mutex> lk(w->fd_mu);
      w->conn = std::move(connected);
      w->fd = w->conn.get();  // from here Stop() can cut a handshake short
    }
    if (auth_.enabled()) {
      try {
        ClientAuthHandshake(w->conn.get(), auth_, kTcpAuthWire, tuning_.timeout_ms, endpoint_);
      } catch (...) {
        DropConnection(w);
        throw;
      }
    }
  }
  const int fd = w->conn.get();
  // The whole chunk (request, reply, payload) must finish in timeoutMs: a peer that trickles
  // its answer cannot hold this worker longer.
  const Deadline deadline = DeadlineIn(tuning_.timeout_ms > 0 ? tuning_.timeout_ms : 1 << 30);
  RequestHeader req{kRequestMagic,     c.op,          0, w->next_request_id++, c.remote, c.length, c.range_start, c.range_length,
                    c.incarnation, c.generation};
  int err = 0;
  auto fail_io = [&](IoStatus st, const char* phase) {
    DropConnection(w);
    if (st == IoStatus::kTimeout) {
      throw NativeError("TIMEOUT", std::string("peer ") + endpoint_ + " did not answer within " +
                                       std::to_string(tuning_.timeout_ms) + " ms (" + phase + ")");
    }
    std::string why = st == IoStatus::kClosed ? "connection closed by peer" : ErrnoMessage("socket", err);
    throw NativeError("TRANSFER_FAILED", std::string("transfer with ") + endpoint_ + " failed while " + phase + ": " + why);
  };
  IoStatus st;
  if (c.op == static_cast<uint16_t>(WireOp::kWrite)) {
    // The CRC pass brings the bytes into cache right before the kernel copies them out.
    if (c.crc) *c.crc = Crc32c(0, c.local, c.length);
    struct iovec iov[2] = {{&req, sizeof req}, {c.local, c.length}};
    st = SendAllVBy(fd, iov, 2, deadline, &err);
  } else {
    st = SendAllBy(fd, &req, sizeof req, deadline, &err);
  }
  if (st != IoStatus::kOk) fail_io(st, "sending the request");
  ResponseHeader resp;
  st = RecvAllBy(fd, &resp, sizeof resp, deadline, &err);
  if (st != IoStatus::kOk) fail_io(st, "waiting for the response");
  if (resp.magic == kResponseMagic && resp.status == static_cast<int32_t>(WireStatus::kUnauthenticated)) {
    DropConnection(w);  // the peer closes it too
    throw NativeError("UNAUTHENTICATED", "peer " + endpoint_ + " (transfer-tcp) requires authentication and this engine has no authSecret "
                                         "(every engine of a cluster needs the same cluster secret)");
  }
  if (resp.magic != kResponseMagic || resp.request_id != req.request_id) {
    DropConnection(w);
    throw NativeError("TRANSFER_FAILED", "protocol error from " + endpoint_ + ": unexpected response header");
  }
  switch (static_cast<WireStatus>(resp.status)) {
    case WireStatus::kOk: break;
    case WireStatus::kOutOfRange: ThrowOutOfRange(endpoint_, c.range_start, c.range_length);
    case WireStatus::kStale: ThrowStale(endpoint_, c.range_start, c.range_length, c.incarnation);
    case WireStatus::kFenced: ThrowFenced(endpoint_, c.range_start, c.range_length, c.generation);
    default:
      throw NativeError("TRANSFER_FAILED", "peer " + endpoint_ + " rejected the request (status " + std::to_string(resp.status) + ")");
  }
  if (c.op == static_cast<uint16_t>(WireOp::kRead)) {
    if (resp.length != c.length) {
      DropConnection(w);
      throw NativeError("TRANSFER_FAILED", "protocol error from " + endpoint_ + ": response length mismatch");
    }
    if (!c.crc) {
      st = RecvAllBy(fd, c.local, c.length, deadline, &err);
      if (st != IoStatus::kOk) fail_io(st, "receiving data");
      return;
    }
    // As RecvAllBy, with each piece checksummed right after its recv(), while it is still in cache.
    uint32_t crc = 0;
    for (uint64_t done = 0; done < c.length;) {
      if (done > 0 && std::chrono::steady_clock::now() >= deadline) fail_io(IoStatus::kTimeout, "receiving data");
      size_t got = 0;
      st = RecvSomeBy(fd, c.local + done, c.length - done, deadline, &got, &err);
      if (st != IoStatus::kOk) fail_io(st, "receiving data");
      crc = Crc32c(crc, c.local + done, got);
      done += got;
    }
    *c.crc = crc;
  }
}

}  // namespace kvstore
