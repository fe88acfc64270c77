// N-API surface of the benchmark baselines (raw TCP pump, memcpy); runs in AsyncWorkers whose
// Execute() never touches napi.
#include "addon_util.h"
#include "raw_pump.h"

namespace kvstore {

namespace {

class TimedWorker : public Napi::AsyncWorker {
 public:
  TimedWorker(Napi::Env env, std::function<double()> fn)
      : Napi::AsyncWorker(env), fn_(std::move(fn)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    try {
      seconds_ = fn_();
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  void OnOK() override { deferred_.Resolve(Napi::Number::New(Env(), seconds_)); }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  std::function<double()> fn_;
  Napi::Promise::Deferred deferred_;
  double seconds_ = 0;
};

Napi::Value RawPumpListenJs(const Napi::CallbackInfo& info) {
  return Guarded(info.Env(), [&]() -> Napi::Value {
    return Napi::Number::New(info.Env(), RawPumpListen(info.Length() > 0 && info[0].IsString() ? ToStr(info[0], "host") : "127.0.0.1"));
  });
}

Napi::Value RawPumpRunJs(const Napi::CallbackInfo& info) {
  return Guarded(info.Env(), [&]() -> Napi::Value {
    std::string ep = ToStr(info[0], "endpoint");
    size_t size = ToU64(info[1], "size");
    uint64_t count = ToU64(info[2], "count");
    PumpMode mode = ToStr(info[3], "mode") == "pingpong" ? PumpMode::kPingPong : PumpMode::kStream;
    auto* w = new TimedWorker(info.Env(), [=] { return RawPumpRun(ep, size, count, mode); });
    Napi::Promise p = w->Promise();
    w->Queue();
    return p;
  });
}

Napi::Value MemcpyRunJs(const Napi::CallbackInfo& info) {
  return Guarded(info.Env(), [&]() -> Napi::Value {
    size_t size = ToU64(info[0], "size");
    uint64_t iters = ToU64(info[1], "iterations");
    size_t span = info.Length() > 2 && info[2].IsNumber() ? ToU64(info[2], "span") : 0;
    auto* w = new TimedWorker(info.Env(), [=] { return MemcpyRun(size, iters, span); });
    Napi::Promise p = w->Promise();
    w->Queue();
    return p;
  });
}

}  // namespace

Napi::Object InitBench(Napi::Env env, Napi::Object exports) {
  exports.Set("rawPumpListen", Napi::Function::New(env, RawPumpListenJs, "rawPumpListen"));
  exports.Set("rawPumpRun", Napi::Function::New(env, RawPumpRunJs, "rawPumpRun"));
  exports.Set("memcpyRun", Napi::Function::New(env, MemcpyRunJs, "memcpyRun"));
  return exports;
}

}  // namespace kvstore
