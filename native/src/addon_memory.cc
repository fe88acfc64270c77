// N-API surface of the memory backends: mapMemory() returns an external ArrayBuffer over the
// mapping (no copy) plus a RegionHandle whose release() detaches the buffer and unmaps. A
// forgotten region is unmapped by the ArrayBuffer's finalizer.
#include <sys/mman.h>
#include <v8.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>

#include "addon_util.h"
#include "mapping.h"
#include "mmap_arena.h"
#include "populate.h"

namespace kvstore {

namespace {

// The ArrayBuffer over a mapping, made with V8's API: N-API's external ArrayBuffer goes through
// node::Buffer, which refuses more than 4 GiB and then runs the finalizer itself, so node-addon-api
// freed its finalizer data twice (`double free detected`, SIGABRT) for every segment past 4 GiB.
// V8's own limit is 2^53-1 bytes. JS views of it are windows (a TypedArray holds at most 4 GiB in
// Node 20). The deleter may run on any thread: it only drops a reference to the mapping.
Napi::ArrayBuffer RegionArrayBuffer(Napi::Env env, const std::shared_ptr<Mapping>& m) {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  auto* ref = new std::shared_ptr<Mapping>(m);
  std::unique_ptr<v8::BackingStore> store = v8::ArrayBuffer::NewBackingStore(
      m->data(), m->size(),
      [](void*, size_t, void* deleter_data) {
        auto* r = static_cast<std::shared_ptr<Mapping>*>(deleter_data);
        (*r)->Unmap();
        delete r;
      },
      ref);
  v8::Local<v8::ArrayBuffer> ab = v8::ArrayBuffer::New(isolate, std::move(store));
  // napi_value is a v8::Local's slot (node's own v8impl conversion).
  return Napi::ArrayBuffer(env, reinterpret_cast<napi_value>(*ab));
}

// Runs Populate() off the JS thread; the handle keeps the mapping until it settles.
class PopulateWorker : public Napi::AsyncWorker {
 public:
  PopulateWorker(Napi::Env env, std::shared_ptr<Mapping> m, Napi::Reference<Napi::ArrayBuffer> keep, unsigned threads, std::function<void()> settled)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), mapping_(std::move(m)), keep_(std::move(keep)), threads_(threads), settled_(std::move(settled)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override { result_ = Populate(static_cast<char*>(mapping_->data()), mapping_->size(), threads_); }
  void OnOK() override {
    Napi::Env env = Env();
    keep_.Reset();
    settled_();
    if (result_.error != 0) {
      Napi::Error e = Napi::Error::New(env, std::string("populate: the machine cannot back the region's ") + std::to_string(mapping_->size()) + " bytes: " + std::strerror(result_.error));
      e.Set("code", Napi::String::New(env, result_.error == ENOMEM ? "OUT_OF_MEMORY" : "MAP_FAILED"));
      deferred_.Reject(e.Value());
      return;
    }
    Napi::Object o = Napi::Object::New(env);
    o.Set("method", Napi::String::New(env, result_.method));
    o.Set("threads", Napi::Number::New(env, result_.threads));
    deferred_.Resolve(o);
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::shared_ptr<Mapping> mapping_;
  Napi::Reference<Napi::ArrayBuffer> keep_;  // a forgotten region's finalizer must not unmap under the threads
  unsigned threads_;
  std::function<void()> settled_;
  PopulateResult result_;
};

class RegionHandle : public Napi::ObjectWrap<RegionHandle> {
 public:
  static Napi::FunctionReference* ctor;
  static void Init(Napi::Env env) {
    Napi::Function f = DefineClass(env, "RegionHandle", {InstanceMethod("release", &RegionHandle::Release), InstanceMethod("populate", &RegionHandle::PopulateJs)});
    ctor = new Napi::FunctionReference(Napi::Persistent(f));
  }
  explicit RegionHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<RegionHandle>(info) {}
  void Attach(std::shared_ptr<Mapping> m, Napi::ArrayBuffer buffer) {
    mapping_ = std::move(m);
    buffer_ = Napi::Weak(buffer);
  }

 private:
  // populate(threads): backs every page now, off the JS thread; a release() meanwhile takes effect
  // when the populate has settled (its threads still write the pages).
  Napi::Value PopulateJs(const Napi::CallbackInfo& info) {
    return Guarded(info.Env(), [&]() -> Napi::Value {
      if (!mapping_ || mapping_->unmapped()) throw NativeError("INVALID_ARGUMENT", "populate: the region is released");
      unsigned threads = info.Length() > 0 && info[0].IsNumber() ? static_cast<unsigned>(ToU64(info[0], "threads")) : 0;
      Napi::Reference<Napi::ArrayBuffer> keep;
      if (!buffer_.IsEmpty() && buffer_.Value().IsArrayBuffer()) keep = Napi::Persistent(buffer_.Value());
      populating_++;
      Ref();  // the handle outlives the worker
      auto* w = new PopulateWorker(info.Env(), mapping_, std::move(keep), std::min(threads, 64u), [this] {
        if (--populating_ == 0 && release_pending_) ReleaseNow();
        Unref();
      });
      Napi::Promise p = w->Promise();
      w->Queue();
      return p;
    });
  }
  void Unmap() {
    if (mapping_) {
      mapping_->Unmap();
      mapping_.reset();
    }
  }
  Napi::Value Release(const Napi::CallbackInfo& info) {
    return Guarded(info.Env(), [&]() -> Napi::Value {
      // Detaching drops the buffer's backing store, whose deleter unmaps: wait for populate's threads.
      if (populating_ > 0) release_pending_ = true;
      else ReleaseNow();
      return info.Env().Undefined();
    });
  }
  void ReleaseNow() {
    if (!buffer_.IsEmpty()) {
      Napi::Value v = buffer_.Value();
      if (!v.IsEmpty() && v.IsArrayBuffer()) {
        Napi::ArrayBuffer ab = v.As<Napi::ArrayBuffer>();
        if (!ab.IsDetached()) ab.Detach();
      }
      buffer_.Reset();
    }
    Unmap();
  }
  std::shared_ptr<Mapping> mapping_;
  Napi::Reference<Napi::ArrayBuffer> buffer_;
  int populating_ = 0;
  bool release_pending_ = false;
};
Napi::FunctionReference* RegionHandle::ctor = nullptr;

Napi::Value MapMemoryJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(env, [&]() -> Napi::Value {
    if (info.Length() < 1 || !info[0].IsObject()) throw NativeError("INVALID_ARGUMENT", "mapMemory(options) needs an options object");
    Napi::Object o = info[0].As<Napi::Object>();
    MapRequest req;
    if (!ParseMemoryKind(ToStr(o.Get("kind"), "kind"), &req.kind)) {
      throw NativeError("INVALID_ARGUMENT", "mapMemory: kind must be memfd, shm, hugetlbfs, file or anonymous");
    }
    req.size = ToU64(o.Get("size"), "size");
    if (o.Has("name") && o.Get("name").IsString()) req.name = ToStr(o.Get("name"), "name");
    if (o.Has("path") && o.Get("path").IsString()) req.path = ToStr(o.Get("path"), "path");
    req.create = o.Get("create").ToBoolean().Value();
    if (o.Has("offset") && !o.Get("offset").IsUndefined()) req.offset = ToU64(o.Get("offset"), "offset");
    req.hugepage = o.Get("hugepage").ToBoolean().Value();
    if (o.Has("hugepageSize") && !o.Get("hugepageSize").IsUndefined()) req.hugepage_size = ToU64(o.Get("hugepageSize"), "hugepageSize");
    req.arena_enabled = o.Get("arenaEnabled").ToBoolean().Value();
    if (o.Has("arenaPoolSize") && !o.Get("arenaPoolSize").IsUndefined()) req.arena_pool_size = ToU64(o.Get("arenaPoolSize"), "arenaPoolSize");

    std::shared_ptr<Mapping> m = MapMemory(req);
    Napi::ArrayBuffer ab = RegionArrayBuffer(env, m);
    Napi::Object handle = RegionHandle::ctor->New({});
    RegionHandle::Unwrap(handle)->Attach(m, ab);
    Napi::Object out = Napi::Object::New(env);
    out.Set("handle", handle);
    out.Set("buffer", ab);
    out.Set("address", Napi::Number::New(env, static_cast<double>(reinterpret_cast<uintptr_t>(m->data()))));
    out.Set("size", Napi::Number::New(env, static_cast<double>(m->size())));
    out.Set("kind", Napi::String::New(env, MemoryKindName(m->kind())));
    out.Set("fd", Napi::Number::New(env, m->fd()));
    return out;
  });
}

Napi::Value AddressOfJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(env, [&]() -> Napi::Value {
    if (info.Length() < 1) throw NativeError("INVALID_ARGUMENT", "addressOf(view) needs a TypedArray, Buffer or DataView");
    uintptr_t base = 0;
    size_t offset = 0;
    if (info[0].IsTypedArray()) {
      Napi::TypedArray ta = info[0].As<Napi::TypedArray>();
      base = reinterpret_cast<uintptr_t>(ta.ArrayBuffer().Data());
      offset = ta.ByteOffset();
    } else if (info[0].IsDataView()) {
      Napi::DataView dv = info[0].As<Napi::DataView>();
      base = reinterpret_cast<uintptr_t>(dv.ArrayBuffer().Data());
      offset = dv.ByteOffset();
    } else if (info[0].IsArrayBuffer()) {
      base = reinterpret_cast<uintptr_t>(info[0].As<Napi::ArrayBuffer>().Data());
    } else {
      throw NativeError("INVALID_ARGUMENT", "addressOf(view) needs a TypedArray, Buffer, DataView or ArrayBuffer");
    }
    if (env.IsExceptionPending()) return env.Undefined();
    return Napi::Number::New(env, static_cast<double>(base + offset));
  });
}

Napi::Value ArenaStatsJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(env, [&]() -> Napi::Value {
    MmapArena::Stats s = MmapArena::GetStats();
    Napi::Object o = Napi::Object::New(env);
    o.Set("decided", s.decided);
    o.Set("enabled", s.enabled);
    o.Set("poolSize", static_cast<double>(s.pool_size));
    o.Set("used", static_cast<double>(s.used));
    o.Set("fallbacks", static_cast<double>(s.fallbacks));
    return o;
  });
}

}  // namespace

Napi::Object InitMemory(Napi::Env env, Napi::Object exports) {
  RegionHandle::Init(env);
  exports.Set("mapMemory", Napi::Function::New(env, MapMemoryJs, "mapMemory"));
  exports.Set("addressOf", Napi::Function::New(env, AddressOfJs, "addressOf"));
  exports.Set("arenaStats", Napi::Function::New(env, ArenaStatsJs, "arenaStats"));
  return exports;
}

}  // namespace kvstore
