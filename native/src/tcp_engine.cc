// TcpEngine (see tcp_engine.h).
#include "tcp_engine.h"

#include <cstring>

#include "chunk_copy.h"
#include "native_error.h"
#include "refusals.h"
#include "wire.h"

namespace kvstore {

TcpEngine::TcpEngine(EngineOptions opts, BatchDone done, RegionTable::WaiterDone waiter_done)
    : opts_(std::move(opts)),
      done_(std::move(done)),
      auth_{opts_.auth_key, opts_.auth_timeout_ms > 0 ? opts_.auth_timeout_ms : 10000, &counters_, ""},
      gate_(opts_.max_connections, opts_.max_connections_per_peer, &counters_),
      regions_(std::move(waiter_done)),
      server_(&regions_, opts_.tuning, opts_.limits, &gate_, auth_),
      shm_server_(&regions_, opts_.limits.io_timeout_ms, &gate_, opts_.shm_peer_uids, auth_) {
  if (opts_.chunk_size == 0) opts_.chunk_size = 1 << 20;
  if (opts_.chunk_size > kMaxChunkOnWire) opts_.chunk_size = kMaxChunkOnWire;
}

std::string TcpEngine::Start(int min_port, int max_port, int start_offset) {
  if (!endpoint_.empty()) return endpoint_;
  const int port = server_.Start(opts_.host, min_port, max_port, start_offset);
  const bool v6 = opts_.host.find(':') != std::string::npos;
  endpoint_ = (v6 ? "[" + opts_.host + "]" : opts_.host) + ":" + std::to_string(port);
  auth_.engine = endpoint_;  // for the log lines of channels made from now on
  if (opts_.shm_transport) shm_server_.Start(endpoint_);
  return endpoint_;
}

PeerChannel* TcpEngine::Peer(const std::string& endpoint) {
  std::lock_guard<std::mutex> lk(mu_);
  if (stopped_) throw NativeError("TRANSFER_FAILED", "transfer engine is closed");
  auto it = peers_.find(endpoint);
  if (it != peers_.end()) return it->second.get();
  const bool local = opts_.memcpy_local && !endpoint_.empty() && endpoint == endpoint_;
  std::shared_ptr<ShmPeer> shm;
  if (!local && opts_.shm_transport) shm = ShmPeer::Connect(endpoint, opts_.tuning.timeout_ms, auth_);
  auto peer = std::make_unique<PeerChannel>(endpoint, opts_.connections_per_peer, opts_.tuning,
                                            local ? &regions_ : nullptr, &done_, std::move(shm), auth_, opts_.shm_only);
  PeerChannel* raw = peer.get();
  peers_.emplace(endpoint, std::move(peer));
  peer_list_.push_back(raw);
  return raw;
}

bool TcpEngine::Submit(const std::vector<TransferOpSpec>& ops, std::shared_ptr<Batch> batch) {
  bool want_crc = false;
  // Validate everything first: a bad op rejects the batch with nothing moved.
  {
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& op = ops[i];
      want_crc = want_crc || op.checksum;
      if (op.length == 0) continue;
      if (!regions_.ContainsLocal(op.local, op.length)) {
        throw NativeError("ADDRESS_OUT_OF_RANGE", "op " + std::to_string(i) + ": local range [" + std::to_string(op.local) +
                                                      ", +" + std::to_string(op.length) +
                                                      ") is not inside a region registered with this engine");
      }
      if (op.remote + op.length < op.remote) {
        throw NativeError("ADDRESS_OUT_OF_RANGE", "op " + std::to_string(i) + ": remote range wraps the address space");
      }
      std::string host, port;
      if (!SplitEndpoint(op.endpoint, &host, &port)) {
        throw NativeError("INVALID_ARGUMENT", "op " + std::to_string(i) + ": bad endpoint '" + op.endpoint + "' (want host:port)");
      }
    }
  }
  if (opts_.memcpy_local && !endpoint_.empty()) {
    uint64_t bytes = 0;
    bool all_local = true;
    for (const auto& op : ops) {
      bytes += op.length;
      all_local = all_local && (op.length == 0 || op.endpoint == endpoint_);
    }
    if (all_local && bytes <= kInlineMemcpyMax) {
      if (want_crc) batch->checksums.Plan(ops, 0);  // each op copied whole
      MemcpyInline(ops, batch.get());
      batch->Complete();
      return true;
    }
  }
  if (opts_.shm_transport && !ops.empty()) {
    uint64_t bytes = 0;
    bool one_peer = true;
    for (const auto& op : ops) {
      bytes += op.length;
      one_peer = one_peer && op.endpoint == ops[0].endpoint;
    }
    const bool local = opts_.memcpy_local && ops[0].endpoint == endpoint_;
    if (one_peer && !local && bytes > 0 && bytes <= kInlineMemcpyMax) {
      if (want_crc) batch->checksums.Plan(ops, 0);  // each op copied whole
      std::vector<Chunk> whole;  // one chunk per op (no striping at this size)
      for (size_t i = 0; i < ops.size(); ++i) {
        const auto& op = ops[i];
        if (op.length == 0) continue;
        Chunk c;
        c.op = op.op;
        c.local = reinterpret_cast<char*>(static_cast<uintptr_t>(op.local));
        c.remote = op.remote;
        c.length = op.length;
        c.range_start = op.remote;
        c.range_length = op.length;
        c.incarnation = op.incarnation;
        c.generation = op.generation;
        if (want_crc) c.crc = batch->checksums.Slot(i, 0);
        whole.push_back(c);
      }
      if (Peer(ops[0].endpoint)->TryMemcpyInline(whole, batch.get())) {
        batch->Complete();
        return true;
      }
    }
  }
  if (want_crc) batch->checksums.Plan(ops, opts_.chunk_size);
  std::map<PeerChannel*, std::vector<Chunk>> plan;
  size_t total = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    if (op.length == 0) continue;
    // Held until the batch's last chunk: unregistering this local buffer waits for it. (Ops of a
    // batch mostly share one buffer: one pin covers them.)
    if (batch->local_pins.empty() || !batch->local_pins.back().Covers(op.local, op.length)) {
      RegionTable::Pin pin;
      if (!regions_.PinLocal(op.local, op.length, &pin)) {
        throw NativeError("ADDRESS_OUT_OF_RANGE", "local range " + RangeText(op.local, op.length) + " is not registered");
      }
      batch->local_pins.push_back(std::move(pin));
    }
    auto& chunks = plan[Peer(op.endpoint)];
    for (uint64_t off = 0; off < op.length; off += opts_.chunk_size) {
      Chunk c;
      c.batch = batch;
      c.op = op.op;
      c.local = reinterpret_cast<char*>(static_cast<uintptr_t>(op.local + off));
      c.remote = op.remote + off;
      c.length = std::min<uint64_t>(opts_.chunk_size, op.length - off);
      c.range_start = op.remote;
      c.range_length = op.length;
      c.incarnation = op.incarnation;
      c.generation = op.generation;
      if (want_crc) c.crc = batch->checksums.Slot(i, off);
      c.stream = StreamedOp(op.op, op.length);
      chunks.push_back(std::move(c));
      ++total;
    }
  }
  if (total == 0) {
    batch->local_pins.clear();
    batch->Complete();
    return true;
  }
  batch->remaining.store(total);
  for (auto& [peer, chunks] : plan) peer->Submit(std::move(chunks));
  return false;
}

int TcpEngine::PeerIndex(const std::string& endpoint) {
  if (opts_.memcpy_local && !endpoint_.empty() && endpoint == endpoint_) return kOwnEndpoint;
  std::lock_guard<std::mutex> lk(mu_);
  if (stopped_ || !opts_.shm_transport) return -1;
  for (size_t i = 0; i < peer_list_.size(); ++i) {
    if (peer_list_[i]->endpoint() == endpoint) return static_cast<int>(i);
  }
  return -1;
}

bool TcpEngine::ReadInline(int peer, uint64_t remote, char* dst, uint64_t length, uint64_t incarnation, uint32_t* crc) {
  if (length == 0 || length > kInlineMemcpyMax || remote + length < remote) return false;
  if (peer == kOwnEndpoint) {
    // No pin: only the JS thread (this one) unregisters, so the region stays for the copy.
    if (!opts_.memcpy_local || regions_.CheckRemote(remote, length, false, incarnation, 0) != RegionTable::Verdict::kOk) return false;
    MoveChunk(dst, reinterpret_cast<const char*>(static_cast<uintptr_t>(remote)), length, crc);
    return true;
  }
  if (peer < 0 || static_cast<size_t>(peer) >= peer_list_.size()) return false;
  return peer_list_[peer]->TryReadInline(remote, dst, length, incarnation, crc);
}

void TcpEngine::MemcpyInline(const std::vector<TransferOpSpec>& ops, Batch* batch) {
  // Check every remote range first so a refused op leaves the whole batch unmoved. No pins: this
  // runs on the JS thread, the only one that unregisters or fences.
  try {
    for (const auto& op : ops) {
      if (op.length == 0) continue;
      const bool write = op.op == static_cast<uint16_t>(WireOp::kWrite);
      ThrowUnlessOk(regions_.CheckRemote(op.remote, op.length, write, op.incarnation, op.generation), endpoint_, op.remote,
                    op.length, op.incarnation, op.generation);
    }
  } catch (const NativeError& e) {
    batch->Fail(e.code(), e.what(), endpoint_);
    return;
  }
  const bool want_crc = batch->checksums.active();
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    if (op.length == 0) continue;
    char* remote = reinterpret_cast<char*>(static_cast<uintptr_t>(op.remote));
    char* local = reinterpret_cast<char*>(static_cast<uintptr_t>(op.local));
    uint32_t* crc = want_crc ? batch->checksums.Slot(i, 0) : nullptr;
    if (op.op == static_cast<uint16_t>(WireOp::kRead)) MoveChunk(local, remote, op.length, crc);
    else MoveChunk(remote, local, op.length, crc);
  }
}

void TcpEngine::Stop() {
  std::map<std::string, std::unique_ptr<PeerChannel>> peers;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopped_) return;
    stopped_ = true;
    peers.swap(peers_);
    peer_list_.clear();
  }
  for (auto& [_, p] : peers) p->Stop();
  shm_server_.Stop();
  server_.Stop();
}

}  // namespace kvstore
