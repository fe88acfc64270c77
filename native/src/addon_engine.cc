// N-API surface of the transfer engine. transfer() returns one promise per batch; I/O threads
// report completion through a ThreadSafeFunction and only the JS thread touches napi. While
// batches are pending the engine object and the TSFN stay referenced (the process stays up).
#include <cmath>
#include <unordered_map>

#include "addon_util.h"
#include "tcp_engine.h"
#include "wire.h"

namespace kvstore {

namespace {

class EngineWrap : public Napi::ObjectWrap<EngineWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "TransferEngine",
                       {InstanceMethod("start", &EngineWrap::Start), InstanceMethod("registerRegion", &EngineWrap::Register),
                        InstanceMethod("unregisterRegion", &EngineWrap::Unregister),
                        InstanceMethod("transfer", &EngineWrap::Transfer), InstanceMethod("readInline", &EngineWrap::ReadInline),
                        InstanceMethod("peerIndex", &EngineWrap::PeerIndex),
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
        if (o.Get("connectionsPerPeer").IsNumber()) opts.connections_per_peer = static_cast<int>(ToU64(o.Get("connectionsPerPeer"), "connectionsPerPeer"));
        if (o.Get("chunkSize").IsNumber()) opts.chunk_size = ToU64(o.Get("chunkSize"), "chunkSize");
        if (o.Get("timeoutMs").IsNumber()) opts.tuning.timeout_ms = static_cast<int>(ToU64(o.Get("timeoutMs"), "timeoutMs"));
        if (o.Get("socketBufferSize").IsNumber()) opts.tuning.buffer_bytes = static_cast<int>(ToU64(o.Get("socketBufferSize"), "socketBufferSize"));
        opts.memcpy_local = o.Get("memcpyLocal").ToBoolean().Value();
        opts.shm_transport = o.Get("shmTransport").ToBoolean().Value();
      }
      tsfn_ = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo&) {}),
                                            "kvstore-transfer-done", 0, 1);
      tsfn_.Unref(env);
      Napi::ThreadSafeFunction tsfn = tsfn_;
      engine_ = std::make_unique<TcpEngine>(opts, [this, tsfn](std::shared_ptr<Batch> b) mutable {
        auto* data = new std::shared_ptr<Batch>(std::move(b));
        napi_status st = tsfn.BlockingCall(data, [this](Napi::Env env, Napi::Function, std::shared_ptr<Batch>* d) {
          std::shared_ptr<Batch> batch = std::move(*d);
          delete d;
          if (env != nullptr) Settle(env, *batch);
        });
        if (st != napi_ok) delete data;
      });
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
  void Settle(Napi::Env env, Batch& b) {
    auto it = pending_.find(b.id);
    if (it == pending_.end()) return;
    Napi::Promise::Deferred deferred = it->second;
    pending_.erase(it);
    if (pending_.empty()) {
      if (!tsfn_released_) tsfn_.Unref(env);
      Unref();
    }
    Napi::HandleScope scope(env);
    if (b.error_code.empty()) deferred.Resolve(env.Undefined());
    else deferred.Reject(CodedError(env, b.error_code, b.error_message).Value());
  }

  Napi::Value Start(const Napi::CallbackInfo& info) {
    return Guarded(info.Env(), [&]() -> Napi::Value {
      int min_port = static_cast<int>(ToU64(info[0], "minPort"));
      int max_port = static_cast<int>(ToU64(info[1], "maxPort"));
      int offset = info.Length() > 2 ? static_cast<int>(ToU64(info[2], "startOffset")) : 0;
      return Napi::String::New(info.Env(), engine_->Start(min_port, max_port, offset));
    });
  }

  Napi::Value Register(const Napi::CallbackInfo& info) {
    return Guarded(info.Env(), [&]() -> Napi::Value {
      uint64_t addr = ToU64(info[0], "address");
      uint64_t size = ToU64(info[1], "size");
      if (size == 0) throw NativeError("INVALID_ARGUMENT", "registerRegion: size must be positive");
      engine_->RegisterRegion(addr, size);
      return info.Env().Undefined();
    });
  }

  Napi::Value Unregister(const Napi::CallbackInfo& info) {
    return Guarded(info.Env(), [&]() -> Napi::Value {
      return Napi::Boolean::New(info.Env(), engine_->UnregisterRegion(ToU64(info[0], "address")));
    });
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
      }
      auto batch = std::make_shared<Batch>();
      batch->id = next_id_++;
      if (pending_.empty()) {
        tsfn_.Ref(env);
        Ref();
      }
      pending_.emplace(batch->id, deferred);
      bool inline_done = false;
      try {
        inline_done = engine_->Submit(ops, batch);
      } catch (...) {
        pending_.erase(batch->id);
        if (pending_.empty()) {
          tsfn_.Unref(env);
          Unref();
        }
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

  // readInline(peerIndex, remoteAddress, target: Uint8Array) -> boolean: a small same-host READ
  // of target.byteLength bytes done now, into the caller's buffer (no batch, no promise); false
  // when it must go through transfer(). The target needs no registration: the copy ends before
  // this call returns, while JS holds the buffer. Raw N-API reads: this runs once per small Get.
  Napi::Value ReadInline(const Napi::CallbackInfo& info) {
    napi_env env = info.Env();
    bool done = false;
    if (!tsfn_released_ && info.Length() >= 3) {
      int32_t peer = -1;
      double remote = -1;
      bool typed = false;
      napi_typedarray_type type = napi_int8_array;
      size_t length = 0;
      void* data = nullptr;
      if (napi_get_value_int32(env, info[0], &peer) != napi_ok || napi_get_value_double(env, info[1], &remote) != napi_ok ||
          !(remote >= 0 && remote <= 9007199254740991.0) || std::floor(remote) != remote || napi_is_typedarray(env, info[2], &typed) != napi_ok || !typed ||
          napi_get_typedarray_info(env, info[2], &type, &length, &data, nullptr, nullptr) != napi_ok || type != napi_uint8_array) {
        ThrowCoded(info.Env(), "INVALID_ARGUMENT", "readInline(peerIndex, remoteAddress, target: Uint8Array): bad arguments");
        return info.Env().Undefined();
      }
      try {
        done = engine_->ReadInline(peer, static_cast<uint64_t>(remote), static_cast<char*>(data), length);
      } catch (...) {
        done = false;  // transfer() will meet and report the same condition
      }
    }
    napi_value out;
    napi_get_boolean(env, done, &out);
    return Napi::Value(env, out);
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    return Guarded(info.Env(), [&]() -> Napi::Value {
      engine_->Stop();  // every pending batch has now queued its completion on the TSFN
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
  uint64_t next_id_ = 1;
  bool tsfn_released_ = false;
};

}  // namespace

Napi::Object InitEngine(Napi::Env env, Napi::Object exports) {
  return ExportClass(exports, "TransferEngine", EngineWrap::Define(env));
}

}  // namespace kvstore
