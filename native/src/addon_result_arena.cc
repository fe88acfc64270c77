// N-API surface of ResultArena: take(len) hands out a range as an ArrayBuffer; the range returns
// to the arena when that ArrayBuffer is garbage collected. Each result holds a reference to the
// arena, so the mapping outlives the JS wrapper while any result is alive.
//
// The ArrayBuffer is made with V8's own API (N-API cannot): its backing store has V8's empty
// deleter, which V8 leaves out of its external-memory count, and a weak handle tells us when the
// ArrayBuffer object dies. Why: V8 counts every other Buffer's bytes and, ~64 MiB past the count
// at its last GC, runs a full mark-compact, stepping the marker 5-10 ms inside each further
// allocation; with every 4 MiB result counted a Get loop measured a mark-compact every ~7 Gets
// and half its time in GC. The arena is a fixed cap whose pages are reused; results taken while
// more than half of it is in use are counted one by one (ResultArena::CountOnTake), so V8 still
// collects before it fills. (Reporting the arena in one lump while over half full was tried: with
// 8 Gets of 16 MiB in flight the lump never came off, and every other allocation then paid a
// marking step: 0.8 GB/s.) Safety: the backing store is reachable only through that one
// ArrayBuffer (every Buffer/view of a result keeps it alive) and the TS wrapper marks it
// untransferable (a postMessage/structuredClone transfer then copies it, as for Node's own pooled
// Buffers), so when it dies nothing can touch the range any more.
#include <v8.h>

#include <memory>

#include "addon_util.h"
#include "result_arena.h"

namespace kvstore {

namespace {

// One live result: what the weak callback needs to give its range back.
struct LiveResult {
  std::shared_ptr<ResultArena> arena;
  char* data;
  size_t counted;  // bytes reported to V8 for this result (0: hidden)
  v8::Global<v8::ArrayBuffer> handle;
};

// First-pass weak callback (inside GC): only plain C++ here, no V8 calls but Reset().
void OnResultCollected(const v8::WeakCallbackInfo<LiveResult>& info) {
  LiveResult* r = info.GetParameter();
  r->handle.Reset();
  if (r->counted) r->arena->Uncount(r->counted);
  r->arena->Give(r->data);
  delete r;
}

class ResultArenaWrap : public Napi::ObjectWrap<ResultArenaWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "ResultArena",
                       {InstanceMethod("take", &ResultArenaWrap::Take), InstanceMethod("stats", &ResultArenaWrap::StatsJs),
                        InstanceMethod("close", &ResultArenaWrap::CloseJs), InstanceMethod("address", &ResultArenaWrap::Address),
                        InstanceMethod("size", &ResultArenaWrap::Size)});
  }

  explicit ResultArenaWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ResultArenaWrap>(info) {
    Guarded(info.Env(), [&]() -> Napi::Value {
      arena_ = std::make_shared<ResultArena>(ToU64(info[0], "size"));
      return info.Env().Undefined();
    });
  }

 private:
  Napi::Value Take(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    return Guarded(env, [&]() -> Napi::Value {
      const uint64_t len = ToU64(info[0], "length");
      if (len == 0) throw NativeError("INVALID_ARGUMENT", "ResultArena.take: length must be positive");
      v8::Isolate* isolate = v8::Isolate::GetCurrent();
      if (const size_t gone = arena_->TakeUncounted()) isolate->AdjustAmountOfExternalAllocatedMemory(-static_cast<int64_t>(gone));
      char* p = arena_->Take(len);
      if (!p) return env.Undefined();
      const size_t counted = arena_->CountOnTake() ? len : 0;
      std::unique_ptr<v8::BackingStore> store = v8::ArrayBuffer::NewBackingStore(p, len, v8::BackingStore::EmptyDeleter, nullptr);
      v8::Local<v8::ArrayBuffer> ab = v8::ArrayBuffer::New(isolate, std::move(store));
      auto* live = new LiveResult{arena_, p, counted, v8::Global<v8::ArrayBuffer>(isolate, ab)};
      live->handle.SetWeak(live, OnResultCollected, v8::WeakCallbackType::kParameter);
      if (counted) isolate->AdjustAmountOfExternalAllocatedMemory(static_cast<int64_t>(counted));
      // napi_value is a v8::Local's slot (node's own v8impl conversion).
      return Napi::Value(env, reinterpret_cast<napi_value>(*ab));
    });
  }

  Napi::Value CloseJs(const Napi::CallbackInfo& info) {
    arena_->Close();
    return info.Env().Undefined();
  }

  Napi::Value StatsJs(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    ResultArena::Stats s = arena_->GetStats();
    Napi::Object o = Napi::Object::New(env);
    o.Set("size", static_cast<double>(arena_->size()));
    o.Set("used", static_cast<double>(s.used));
    o.Set("ranges", static_cast<double>(s.ranges));
    o.Set("largestFree", static_cast<double>(s.largest_free));
    o.Set("refusals", static_cast<double>(s.refusals));
    return o;
  }

  Napi::Value Address(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(reinterpret_cast<uintptr_t>(arena_->base())));
  }

  Napi::Value Size(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(arena_->size()));
  }

  std::shared_ptr<ResultArena> arena_;
};

}  // namespace

Napi::Object InitResultArena(Napi::Env env, Napi::Object exports) {
  return ExportClass(exports, "ResultArena", ResultArenaWrap::Define(env));
}

}  // namespace kvstore
