// N-API surface of the transfer engine. transfer() returns one promise per batch (resolving to
// the ops' CRC-32Cs when any op asked, rejecting with the failed peers' endpoints);
// unregisterRegion() and setFence() return a promise that settles once the bytes they wait for
// have moved. I/O threads report through one ThreadSafeFunction and only the JS thread touches
// napi. While anything is pending the engine object and the TSFN stay referenced (the process
// stays up).
#include <cmath>
#include <unordered_map>

#include "addon_util.h"
#include "tcp_engine.h"
#include "wire.h"

namespace kvstore {

namespace {

// transfer()'s second argument: which optional op fields the wrapper saw set.
constexpr uint32_t kFieldChecked = 1;   // incarnation or generation
constexpr uint32_t kFieldChecksum = 2;  // checksum

// What an I/O thread hands to the JS thread: a finished batch, or a waiter whose pins are gone.
struct Completion {
  std::shared_ptr<Batch> batch;
  uint64_t waiter = 0;
};

int ToInt(const Napi::Value& v, const char* what) {
  const uint64_t x = ToU64(v, what);
  if (x > 0x7fffffff) throw NativeError("INVALID_ARGUMENT", std::string(what) + " is too large");
  return static_cast<int>(x);
}

// An optional non-negative integer field: 0 when absent (undefined or null).
uint64_t OptionalU64(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  return v.IsUndefined() || v.IsNull() ? 0 : ToU64(v, key);
}

class EngineWrap : public Napi::ObjectWrap<EngineWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "TransferEngine",
                       {InstanceMethod("start", &EngineWrap::Start), InstanceMethod("registerRegion", &EngineWrap::Register),
                        InstanceMethod("unregisterRegion", &EngineWrap::Unregister),
                        InstanceMethod("setFence", &EngineWrap::SetFence),
                        InstanceMethod("transfer", &EngineWrap::Transfer), InstanceMethod("readInline", &EngineWrap::ReadInline),
                        InstanceMethod("readInlineCrc", &EngineWrap::ReadInlineCrc),
                        InstanceMethod("peerIndex", &EngineWrap::PeerIndex), InstanceMethod("stats", &EngineWrap::Stats),
                        InstanceMethod("close", &EngineWrap::Close),
                        InstanceMethod("pendingBatches", &EngineWrap::PendingBatches)});
  }

  explicit EngineWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<EngineWrap>(info) {
    Napi::Env env = info.Env();
    Guarded(env, [&]() -> Napi::Value {
      EngineOptions opts;
      if (info.Length() > 0 && info[0].IsObject()) {
        Napi::Object o = info[0].As<Napi::Object>();
        if (o.Get("host").IsString()) opts.host = ToStr(o.Get("host"), "host");
        if (o.Get("connectionsPerPeer").IsNumber()) opts.connections_per_peer = ToInt(o.Get("connectionsPerPeer"), "connectionsPerPeer");
        if (o.Get("chunkSize").IsNumber()) opts.chunk_size = ToU64(o.Get("chunkSize"), "chunkSize");
        if (o.Get("timeoutMs").IsNumber()) opts.tuning.timeout_ms = ToInt(o.Get("timeoutMs"), "timeoutMs");
        opts.limits.io_timeout_ms = opts.tuning.timeout_ms;
        if (o.Get("ioTimeoutMs").IsNumber()) opts.limits.io_timeout_ms = ToInt(o.Get("ioTimeoutMs"), "ioTimeoutMs");
        if (o.Get("idleTimeoutMs").IsNumber()) opts.limits.idle_timeout_ms = ToInt(o.Get("idleTimeoutMs"), "idleTimeoutMs");
        if (o.Get("maxConnections").IsNumber()) opts.max_connections = ToU64(o.Get("maxConnections"), "maxConnections");
        if (o.Get("maxConnectionsPerPeer").IsNumber()) {
          opts.max_connections_per_peer = ToU64(o.Get("maxConnectionsPerPeer"), "maxConnectionsPerPeer");
        }
        if (o.Get("socketBufferSize").IsNumber()) opts.tuning.buffer_bytes = ToInt(o.Get("socketBufferSize"), "socketBufferSize");
        Napi::Value secret = o.Get("authSecret");
        if (!secret.IsUndefined() && !secret.IsNull()) {
          // Copied here; the wrapper checked it is a Buffer of at least 32 bytes (TypeError otherwise).
          if (!secret.IsBuffer()) throw NativeError("INVALID_ARGUMENT", "authSecret must be a Buffer");
          Napi::Buffer<uint8_t> b = secret.As<Napi::Buffer<uint8_t>>();
          opts.auth_key = std::make_shared<const AuthKey>(b.Data(), b.Length());
        }
        if (o.Get("authTimeoutMs").IsNumber()) opts.auth_timeout_ms = ToInt(o.Get("authTimeoutMs"), "authTimeoutMs");
        opts.memcpy_local = o.Get("memcpyLocal").ToBoolean().Value();
        opts.shm_transport = o.Get("shmTransport").ToBoolean().Value();
        opts.shm_only = o.Get("shmOnly").ToBoolean().Value();
        if (opts.shm_only) opts.shm_transport = true;
        Napi::Value uids = o.Get("shmPeerUids");
        if (!uids.IsUndefined() && !uids.IsNull()) {
          if (!uids.IsArray()) throw NativeError("INVALID_ARGUMENT", "shmPeerUids must be an array of uids");
          Napi::Array arr = uids.As<Napi::Array>();
          for (uint32_t i = 0; i < arr.Length(); ++i) {
            const uint64_t uid = ToU64(arr.Get(i), "shmPeerUids[i]");
            if (uid > 0xffffffffu) throw NativeError("INVALID_ARGUMENT", "shmPeerUids[i] is not a uid");
            opts.shm_peer_uids.push_back(static_cast<uint32_t>(uid));
          }
          if (opts.shm_peer_uids.empty()) throw NativeError("INVALID_ARGUMENT", "shmPeerUids must name at least one uid");
        }
      }
      tsfn_ = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo&) {}),
                                            "kvstore-transfer-done", 0, 1);
      tsfn_.Unref(env);
      Napi::ThreadSafeFunction tsfn = tsfn_;
      auto post = [this, tsfn](Completion* c) mutable {
        napi_status st = tsfn.BlockingCall(c, [this](Napi::Env env, Napi::Function, Completion* d) {
          std::unique_ptr<Completion> done(d);
          if (env == nullptr) return;
          if (done->batch) Settle(env, *done->batch);
          else SettleWaiter(env, done->waiter);
        });
        if (st != napi_ok) delete c;
      };
      engine_ = std::make_unique<TcpEngine>(
          opts, [post](std::shared_ptr<Batch> b) mutable { post(new Completion{std::move(b), 0}); },
          [post](uint64_t waiter) mutable { post(new Completion{nullptr, waiter}); });
      return env.Undefined();
    });
  }

  // The TSFN is released by close(), never here: during environment teardown Node may be
  // tearing the TSFN down itself when this finalizer runs. An engine collected without close()
  // leaves one unreferenced TSFN behind (it cannot keep the process alive).
  ~EngineWrap() override {
    if (engine_) engine_->Stop();
  }

 private:
  struct Waiter {
    Napi::Promise::Deferred deferred;
    bool unregister;  // resolves true (the region was registered); setFence resolves undefined
  };

  // Something now pending: keep the engine and the TSFN referenced until it settles.
  void Hold(Napi::Env env) {
    if (outstanding_++ == 0) {
      if (!tsfn_released_) tsfn_.Ref(env);
      Ref();
    }
  }
  void Drop(Napi::Env env) {
    if (--outstanding_ == 0) {
      if (!tsfn_released_) tsfn_.Unref(env);
      Unref();
    }
  }

  void Settle(Napi::Env env, Batch& b) {
    auto it = pending_.find(b.id);
    if (it == pending_.end()) return;
    Napi::Promise::Deferred deferred = it->second;
    pending_.erase(it);
    Drop(env);
    Napi::HandleScope scope(env);
    if (!b.error_code.empty()) {
      Napi::Error err = CodedError(env, b.error_code, b.error_message);
      Napi::Array endpoints = Napi::Array::New(env, b.failed_endpoints.size());
      for (uint32_t i = 0; i < b.failed_endpoints.size(); ++i) endpoints.Set(i, Napi::String::New(env, b.failed_endpoints[i]));
      err.Set("endpoints", endpoints);
      deferred.Reject(err.Value());
    } else if (b.checksums.active()) {
      // A number for a one-op batch, an array otherwise: the wrapper makes the Uint32Array in JS,
      // where a small one is a young-generation object (one made here is an ArrayBuffer with an
      // external backing store: ~0.5 us more per batch, mostly in GC).
      const OpChecksums& crcs = b.checksums;
      napi_value out;
      if (crcs.size() == 1) {
        napi_create_uint32(env, crcs.crc(0), &out);
      } else {
        napi_create_array_with_length(env, crcs.size(), &out);
        for (uint32_t i = 0; i < crcs.size(); ++i) {
          napi_value v;
          napi_create_uint32(env, crcs.crc(i), &v);
          napi_set_element(env, out, i, v);
        }
      }
      deferred.Resolve(Napi::Value(env, out));
    } else {
      deferred.Resolve(env.Undefined());
    }
  }

  void SettleWaiter(Napi::Env env, uint64_t id) {
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return;
    Waiter w = it->second;
    waiters_.erase(it);
    Drop(env);
    Napi::HandleScope scope(env);
    w.deferred.Resolve(w.unregister ? Napi::Boolean::New(env, true) : env.Undefined());
  }

  // A promise for an unregister/setFence: settled now, or by SettleWaiter once pins are gone.
  Napi::Value WaiterPromise(Napi::Env env, uint64_t id, bool pending, Napi::Value now, bool unregister) {
    Napi::Promise::Deferred d = Napi::Promise::Deferred::New(env);
    // After close() every I/O thread is joined and no pin is left, so nothing is pending then.
    if (!pending || tsfn_released_) {
      d.Resolve(now);
    } else {
      waiters_.emplace(id, Waiter{d, unregister});
      Hold(env);
    }
    return d.Promise();
  }

  Napi::Value Start(const Napi::CallbackInfo& info) {
    return Guarded(info.Env(), [&]() -> Napi::Value {
      int min_port = ToInt(info[0], "minPort");
      int max_port = ToInt(info[1], "maxPort");
      int offset = info.Length() > 2 ? ToInt(info[2], "startOffset") : 0;
      return Napi::String::New(info.Env(), engine_->Start(min_port, max_port, offset));
    });
  }

  // registerRegion(address, size, { serve }?) -> incarnation
  Napi::Value Register(const Napi::CallbackInfo& info) {
    return Guarded(info.Env(), [&]() -> Napi::Value {
      uint64_t addr = ToU64(info[0], "address");
      uint64_t size = ToU64(info[1], "size");
      if (size == 0) throw NativeError("INVALID_ARGUMENT", "registerRegion: size must be positive");
      if (addr + size < addr) throw NativeError("INVALID_ARGUMENT", "registerRegion: the range wraps the address space");
      bool serve = true;
      if (info.Length() > 2 && info[2].IsObject()) {
        Napi::Value v = info[2].As<Napi::Object>().Get("serve");
        if (!v.IsUndefined()) serve = v.ToBoolean().Value();
      }
      return Napi::Number::New(info.Env(), static_cast<double>(engine_->RegisterRegion(addr, size, serve)));
    });
  }

  // unregisterRegion(address) -> Promise<boolean>: removed at once; settles when no chunk moves bytes in it.
  Napi::Value Unregister(const Napi::CallbackInfo& info) {
    return Guarded(info.Env(), [&]() -> Napi::Value {
      const uint64_t addr = ToU64(info[0], "address");
      const uint64_t id = next_waiter_++;
      bool pending = false;
      const bool found = engine_->UnregisterRegion(addr, id, &pending);
      return WaiterPromise(info.Env(), id, pending, Napi::Boolean::New(info.Env(), found), true);
    });
  }

  // setFence(address, { below, revoked? }) -> Promise<void>: settles when no refused WRITE moves bytes.
  Napi::Value SetFence(const Napi::CallbackInfo& info) {
    return Guarded(info.Env(), [&]() -> Napi::Value {
      const uint64_t addr = ToU64(info[0], "address");
      if (info.Length() < 2 || !info[1].IsObject()) throw NativeError("INVALID_ARGUMENT", "setFence(address, { below, revoked? })");
      Napi::Object f = info[1].As<Napi::Object>();
      WriteFence fence;
      fence.below = ToU64(f.Get("below"), "fence.below");
      Napi::Value rv = f.Get("revoked");
      if (!rv.IsUndefined() && !rv.IsNull()) {
        if (!rv.IsArray()) throw NativeError("INVALID_ARGUMENT", "fence.revoked must be an array of generations");
        Napi::Array arr = rv.As<Napi::Array>();
        if (arr.Length() > kMaxRevokedGenerations) {
          throw NativeError("INVALID_ARGUMENT", "fence.revoked lists " + std::to_string(arr.Length()) + " generations; at most " +
                                                    std::to_string(kMaxRevokedGenerations) + " (raise `below` instead)");
        }
        for (uint32_t i = 0; i < arr.Length(); ++i) fence.revoked.push_back(ToU64(arr.Get(i), "fence.revoked[i]"));
      }
      const uint64_t id = next_waiter_++;
      bool pending = false;
      if (!engine_->SetFence(addr, fence, id, &pending)) {
        throw NativeError("ADDRESS_OUT_OF_RANGE", "setFence: no served region is registered at address " + std::to_string(addr));
      }
      return WaiterPromise(info.Env(), id, pending, info.Env().Undefined(), false);
    });
  }

  Napi::Value Stats(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const EngineCounters& c = engine_->counters();
    Napi::Object o = Napi::Object::New(env);
    auto put = [&](const char* k, const std::atomic<uint64_t>& v) {
      o.Set(k, Napi::Number::New(env, static_cast<double>(v.load(std::memory_order_relaxed))));
    };
    put("connectionsOpen", c.connections_open);
    put("accepted", c.accepted);
    put("refusedOverCap", c.refused_over_cap);
    put("refusedNoResources", c.refused_no_resources);
    put("closedIdle", c.closed_idle);
    put("closedIoTimeout", c.closed_io_timeout);
    put("badRequests", c.bad_requests);
    put("staleRefused", c.stale_refused);
    put("fencedRefused", c.fenced_refused);
    put("shmPeersRefused", c.shm_peers_refused);
    put("authRefused", c.auth_refused);
    put("fileReadErrors", c.file_read_errors);
    return o;
  }

  Napi::Value PendingBatches(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(pending_.size()));
  }

  Napi::Value Transfer(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
    try {
      if (tsfn_released_) throw NativeError("TRANSFER_FAILED", "transfer engine is closed");
      if (info.Length() < 1 || !info[0].IsArray()) throw NativeError("INVALID_ARGUMENT", "transfer(ops) needs an array");
      Napi::Array arr = info[0].As<Napi::Array>();
      // transfer(ops, fields, checksumMask?): the wrapper says which optional fields some op sets
      // (kFieldChecked: incarnation or generation, kFieldChecksum: checksum; all when absent); a
      // property read per op costs ~0.1 us, a fourteenth of a small inline copy, so the others are
      // not read. For up to 32 ops it also passes which ops ask for a checksum (bit i: op i), so
      // `checksum` is not read either.
      uint32_t fields = kFieldChecked | kFieldChecksum;
      if (info.Length() >= 2 && info[1].IsNumber()) fields = info[1].As<Napi::Number>().Uint32Value();
      else if (info.Length() >= 2 && !info[1].IsUndefined()) fields = info[1].ToBoolean().Value() ? kFieldChecked : 0;
      const bool checked = (fields & kFieldChecked) != 0;
      const bool checksums = (fields & kFieldChecksum) != 0;
      const bool have_mask = checksums && info.Length() >= 3 && info[2].IsNumber() && arr.Length() <= 32;
      const uint32_t mask = have_mask ? info[2].As<Napi::Number>().Uint32Value() : 0;
      std::vector<TransferOpSpec> ops(arr.Length());
      for (uint32_t i = 0; i < arr.Length(); ++i) {
        Napi::Value v = arr.Get(i);
        if (!v.IsObject()) throw NativeError("INVALID_ARGUMENT", "transfer: op " + std::to_string(i) + " is not an object");
        Napi::Object o = v.As<Napi::Object>();
        std::string op = ToStr(o.Get("op"), "op");
        if (op == "read") ops[i].op = static_cast<uint16_t>(WireOp::kRead);
        else if (op == "write") ops[i].op = static_cast<uint16_t>(WireOp::kWrite);
        else throw NativeError("INVALID_ARGUMENT", "transfer: op " + std::to_string(i) + " must be 'read' or 'write'");
        ops[i].endpoint = ToStr(o.Get("endpoint"), "endpoint");
        ops[i].remote = ToU64(o.Get("remoteAddress"), "remoteAddress");
        ops[i].local = ToU64(o.Get("localAddress"), "localAddress");
        ops[i].length = ToU64(o.Get("length"), "length");
        if (checked) {
          ops[i].incarnation = OptionalU64(o, "incarnation");
          ops[i].generation = OptionalU64(o, "generation");
        }
        if (have_mask) ops[i].checksum = ((mask >> i) & 1) != 0;
        else if (checksums) ops[i].checksum = o.Get("checksum").ToBoolean().Value();
      }
      auto batch = std::make_shared<Batch>();
      batch->id = next_id_++;
      pending_.emplace(batch->id, deferred);
      Hold(env);
      bool inline_done = false;
      try {
        inline_done = engine_->Submit(ops, batch);
      } catch (...) {
        pending_.erase(batch->id);
        Drop(env);
        throw;
      }
      if (inline_done) Settle(env, *batch);
    } catch (const NativeError& e) {
      deferred.Reject(CodedError(env, e.code(), e.what()).Value());
    } catch (const std::exception& e) {
      deferred.Reject(CodedError(env, "INTERNAL", e.what()).Value());
    } catch (...) {
      deferred.Reject(CodedError(env, "INTERNAL", "unknown native error").Value());
    }
    return deferred.Promise();
  }

  // peerIndex(endpoint) -> number: the handle readInline() takes for that endpoint, -1 while this
  // engine has no channel to it (transfer() creates one).
  Napi::Value PeerIndex(const Napi::CallbackInfo& info) {
    return Guarded(info.Env(), [&]() -> Napi::Value {
      if (tsfn_released_) return Napi::Number::New(info.Env(), -1);
      return Napi::Number::New(info.Env(), engine_->PeerIndex(ToStr(info[0], "endpoint")));
    });
  }

  // readInline(peerIndex, remoteAddress, target: Uint8Array, incarnation?) -> boolean: a small
  // same-host READ of target.byteLength bytes done now, into the caller's buffer (no batch, no
  // promise); false when it must go through transfer(). The target needs no registration: the
  // copy ends before this call returns, while JS holds the buffer. Raw N-API reads: this runs
  // once per small Get.
  Napi::Value ReadInline(const Napi::CallbackInfo& info) {
    napi_env env = info.Env();
    bool done = false;
    if (!InlineRead(info, "readInline", nullptr, &done)) return info.Env().Undefined();
    napi_value out;
    napi_get_boolean(env, done, &out);
    return Napi::Value(env, out);
  }

  // readInlineCrc(peerIndex, remoteAddress, target, incarnation?) -> number: as readInline, the
  // copy fused with the CRC-32C of the bytes copied, which it returns (unsigned); -1 when nothing
  // was copied.
  Napi::Value ReadInlineCrc(const Napi::CallbackInfo& info) {
    napi_env env = info.Env();
    bool done = false;
    uint32_t crc = 0;
    if (!InlineRead(info, "readInlineCrc", &crc, &done)) return info.Env().Undefined();
    napi_value out;
    napi_create_double(env, done ? static_cast<double>(crc) : -1.0, &out);
    return Napi::Value(env, out);
  }

  // The shared body of readInline / readInlineCrc: false (an INVALID_ARGUMENT pending) on bad
  // arguments; otherwise *done says whether the bytes (and *crc when asked) are there.
  bool InlineRead(const Napi::CallbackInfo& info, const char* name, uint32_t* crc, bool* done) {
    napi_env env = info.Env();
    *done = false;
    if (tsfn_released_ || info.Length() < 3) return true;
    int32_t peer = -1;
    double remote = -1;
    double incarnation = 0;
    bool typed = false;
    napi_typedarray_type type = napi_int8_array;
    size_t length = 0;
    void* data = nullptr;
    napi_valuetype inc_type = napi_undefined;
    if (info.Length() > 3) napi_typeof(env, info[3], &inc_type);
    const bool bad_inc = inc_type != napi_undefined &&
                         (napi_get_value_double(env, info[3], &incarnation) != napi_ok || !(incarnation >= 0 && incarnation <= 9007199254740991.0) ||
                          std::floor(incarnation) != incarnation);
    if (bad_inc || napi_get_value_int32(env, info[0], &peer) != napi_ok || napi_get_value_double(env, info[1], &remote) != napi_ok ||
        !(remote >= 0 && remote <= 9007199254740991.0) || std::floor(remote) != remote || napi_is_typedarray(env, info[2], &typed) != napi_ok || !typed ||
        napi_get_typedarray_info(env, info[2], &type, &length, &data, nullptr, nullptr) != napi_ok || type != napi_uint8_array) {
      ThrowCoded(info.Env(), "INVALID_ARGUMENT", std::string(name) + "(peerIndex, remoteAddress, target: Uint8Array, incarnation?): bad arguments");
      return false;
    }
    try {
      *done = engine_->ReadInline(peer, static_cast<uint64_t>(remote), static_cast<char*>(data), length, static_cast<uint64_t>(incarnation), crc);
    } catch (...) {
      *done = false;  // transfer() will meet and report the same condition
    }
    return true;
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    return Guarded(info.Env(), [&]() -> Napi::Value {
      engine_->Stop();  // every pending batch and waiter has now queued its completion on the TSFN
      if (!tsfn_released_) {
        tsfn_released_ = true;
        tsfn_.Release();  // queued completions are still delivered, then the TSFN closes
      }
      return info.Env().Undefined();
    });
  }

  std::unique_ptr<TcpEngine> engine_;
  Napi::ThreadSafeFunction tsfn_;
  std::unordered_map<uint64_t, Napi::Promise::Deferred> pending_;  // JS thread only
  std::unordered_map<uint64_t, Waiter> waiters_;                   // JS thread only
  size_t outstanding_ = 0;                                         // pending_ + waiters_
  uint64_t next_id_ = 1;
  uint64_t next_waiter_ = 1;
  bool tsfn_released_ = false;
};

}  // namespace

Napi::Object InitEngine(Napi::Env env, Napi::Object exports) {
  return ExportClass(exports, "TransferEngine", EngineWrap::Define(env));
}

}  // namespace kvstore
