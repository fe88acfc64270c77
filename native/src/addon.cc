// Module entry of the native addon: registers the memory, result arena, engine, checksum, peer-credential and benchmark
// exports.
#include <cmath>

#include "addon_util.h"

namespace kvstore {

uint64_t ToU64(const Napi::Value& v, const char* what) {
  if (v.IsBigInt()) {
    bool lossless = true;
    uint64_t r = v.As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless) throw NativeError("INVALID_ARGUMENT", std::string(what) + " does not fit in 64 bits");
    return r;
  }
  if (!v.IsNumber()) throw NativeError("INVALID_ARGUMENT", std::string(what) + " must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d > 9007199254740991.0 || std::floor(d) != d) {
    throw NativeError("INVALID_ARGUMENT", std::string(what) + " must be a non-negative integer (got " + std::to_string(d) + ")");
  }
  return static_cast<uint64_t>(d);
}

std::string ToStr(const Napi::Value& v, const char* what) {
  if (!v.IsString()) throw NativeError("INVALID_ARGUMENT", std::string(what) + " must be a string");
  return v.As<Napi::String>().Utf8Value();
}

}  // namespace kvstore

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  kvstore::InitMemory(env, exports);
  kvstore::InitEngine(env, exports);
  kvstore::InitBench(env, exports);
  kvstore::InitResultArena(env, exports);
  kvstore::InitChecksum(env, exports);
  kvstore::InitFileLock(env, exports);
  kvstore::InitPeerCredentials(env, exports);
  exports.Set("rdmaAvailable", Napi::Boolean::New(env, false));
  return exports;
}

NODE_API_MODULE(kvstore_native, Init)
