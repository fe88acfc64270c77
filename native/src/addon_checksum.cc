// N-API surface of the CRC-32C primitives (crc32c.h): crc32c, copyWithCrc32c, crc32cCombine, the
// backend in use, and the benchmark loops. The checksums run synchronously on the calling thread
// (they run at memory speed; a thread hand-off would cost more than a checksum of up to several
// MiB); the benchmark runs in an AsyncWorker whose Execute() never touches napi.
#include <cmath>
#include <cstring>

#include "addon_util.h"
#include "checksum_bench.h"
#include "crc32c.h"

namespace kvstore {

namespace {

struct Bytes {
  uint8_t* data;
  size_t length;
};

// The bytes a TypedArray, Buffer or DataView spans.
Bytes ViewBytes(Napi::Env env, const Napi::Value& v, const char* what) {
  void* data = nullptr;
  size_t length = 0;
  if (v.IsTypedArray()) {
    napi_typedarray_type type;
    size_t elements = 0;
    if (napi_get_typedarray_info(env, v, &type, &elements, &data, nullptr, nullptr) != napi_ok) {
      throw NativeError("INVALID_ARGUMENT", std::string(what) + ": unreadable TypedArray");
    }
    length = v.As<Napi::TypedArray>().ByteLength();
  } else if (v.IsDataView()) {
    if (napi_get_dataview_info(env, v, &length, &data, nullptr, nullptr) != napi_ok) {
      throw NativeError("INVALID_ARGUMENT", std::string(what) + ": unreadable DataView");
    }
  } else {
    throw NativeError("INVALID_ARGUMENT", std::string(what) + " must be a TypedArray, Buffer or DataView");
  }
  return {static_cast<uint8_t*>(data), data ? length : 0};  // a detached buffer spans nothing
}

uint32_t ToU32(const Napi::Value& v, const char* what) {
  if (!v.IsNumber()) throw NativeError("INVALID_ARGUMENT", std::string(what) + " must be a number");
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d > 4294967295.0 || std::floor(d) != d) {
    throw NativeError("INVALID_ARGUMENT", std::string(what) + " must be an integer in 0..2^32-1 (got " + std::to_string(d) + ")");
  }
  return static_cast<uint32_t>(d);
}

// The optional backend name at info[i]: absent/undefined means the process's active backend.
bool OptionalImpl(const Napi::CallbackInfo& info, size_t i, Crc32cImpl* out) {
  if (info.Length() <= i || info[i].IsUndefined()) return false;
  const std::string name = ToStr(info[i], "implementation");
  if (!Crc32cImplFromName(name.c_str(), out)) throw NativeError("INVALID_ARGUMENT", "unknown CRC-32C implementation: " + name);
  if (!Crc32cImplAvailable(*out)) throw NativeError("INVALID_ARGUMENT", "CRC-32C implementation not available on this CPU: " + name);
  return true;
}

// crc32c(view, seed, implementation?)
Napi::Value Crc32cJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(env, [&]() -> Napi::Value {
    const Bytes b = ViewBytes(env, info[0], "data");
    const uint32_t seed = ToU32(info[1], "seed");
    Crc32cImpl impl;
    const bool forced = OptionalImpl(info, 2, &impl);
    if (b.length == 0) return Napi::Number::New(env, seed);
    return Napi::Number::New(env, forced ? Crc32cWith(impl, seed, b.data, b.length) : Crc32c(seed, b.data, b.length));
  });
}

// copyWithCrc32c(dst, src, seed, implementation?): copies src into the start of dst.
Napi::Value CopyWithCrc32cJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(env, [&]() -> Napi::Value {
    const Bytes dst = ViewBytes(env, info[0], "dst");
    const Bytes src = ViewBytes(env, info[1], "src");
    const uint32_t seed = ToU32(info[2], "seed");
    Crc32cImpl impl;
    const bool forced = OptionalImpl(info, 3, &impl);
    if (dst.length < src.length) {
      throw NativeError("INVALID_ARGUMENT", "dst (" + std::to_string(dst.length) + " bytes) is shorter than src (" + std::to_string(src.length) + " bytes)");
    }
    if (src.length == 0) return Napi::Number::New(env, seed);
    const uintptr_t d = reinterpret_cast<uintptr_t>(dst.data), s = reinterpret_cast<uintptr_t>(src.data);
    uint32_t crc;
    if (d < s + src.length && s < d + src.length) {
      // Views of one ArrayBuffer may overlap: checksum the source first, then move it.
      crc = forced ? Crc32cWith(impl, seed, src.data, src.length) : Crc32c(seed, src.data, src.length);
      std::memmove(dst.data, src.data, src.length);
    } else {
      crc = forced ? CopyCrc32cWith(impl, seed, dst.data, src.data, src.length) : CopyCrc32c(seed, dst.data, src.data, src.length);
    }
    return Napi::Number::New(env, crc);
  });
}

// crc32cCombine(crcA, crcB, lengthB)
Napi::Value Crc32cCombineJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(env, [&]() -> Napi::Value {
    const uint32_t a = ToU32(info[0], "crcA");
    const uint32_t b = ToU32(info[1], "crcB");
    const uint64_t length_b = ToU64(info[2], "lengthB");
    return Napi::Number::New(env, Crc32cCombine(a, b, static_cast<size_t>(length_b)));
  });
}

// crc32cInfo() -> { active, available: string[], avx512Copy: 'memcpy' | 'vector' | 'none' }
Napi::Value Crc32cInfoJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(env, [&]() -> Napi::Value {
    Napi::Object o = Napi::Object::New(env);
    o.Set("active", Crc32cImplName(Crc32cActiveImpl()));
    Napi::Array available = Napi::Array::New(env);
    for (int i = 0; i < kCrc32cImplCount; ++i) {
      const auto impl = static_cast<Crc32cImpl>(i);
      if (Crc32cImplAvailable(impl)) available.Set(available.Length(), Crc32cImplName(impl));
    }
    o.Set("available", available);
    o.Set("avx512Copy", Crc32cAvx512CopyMethod());
    return o;
  });
}

class ChecksumBenchWorker : public Napi::AsyncWorker {
 public:
  ChecksumBenchWorker(Napi::Env env, Crc32cImpl impl, size_t size, uint64_t iterations, size_t span)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), impl_(impl), size_(size), iterations_(iterations), span_(span) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    try {
      times_ = ChecksumBenchRun(impl_, size_, iterations_, span_);
    } catch (const std::exception& e) {
      SetError(e.what());
    }
  }
  void OnOK() override {
    Napi::Object o = Napi::Object::New(Env());
    o.Set("memcpy", times_.memcpy_s);
    o.Set("crc32c", times_.crc32c_s);
    o.Set("separate", times_.separate_s);
    o.Set("fused", times_.fused_s);
    deferred_.Resolve(o);
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  Crc32cImpl impl_;
  size_t size_;
  uint64_t iterations_;
  size_t span_;
  ChecksumBenchTimes times_{};
};

// crc32cBench(size, iterations, span, implementation?) -> Promise<seconds per loop>
Napi::Value Crc32cBenchJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(env, [&]() -> Napi::Value {
    const size_t size = ToU64(info[0], "size");
    const uint64_t iterations = ToU64(info[1], "iterations");
    const size_t span = ToU64(info[2], "span");
    Crc32cImpl impl = Crc32cActiveImpl();
    OptionalImpl(info, 3, &impl);
    auto* w = new ChecksumBenchWorker(env, impl, size, iterations, span);
    Napi::Promise p = w->Promise();
    w->Queue();
    return p;
  });
}

}  // namespace

Napi::Object InitChecksum(Napi::Env env, Napi::Object exports) {
  exports.Set("crc32c", Napi::Function::New(env, Crc32cJs, "crc32c"));
  exports.Set("copyWithCrc32c", Napi::Function::New(env, CopyWithCrc32cJs, "copyWithCrc32c"));
  exports.Set("crc32cCombine", Napi::Function::New(env, Crc32cCombineJs, "crc32cCombine"));
  exports.Set("crc32cInfo", Napi::Function::New(env, Crc32cInfoJs, "crc32cInfo"));
  exports.Set("crc32cBench", Napi::Function::New(env, Crc32cBenchJs, "crc32cBench"));
  return exports;
}

}  // namespace kvstore
