// N-API entry-point helpers: every exported function runs inside Guarded(), which turns any
// C++ exception into a JS Error with a `code`, so no exception crosses N-API.
#pragma once
#include <napi.h>

#include <string>

#include "native_error.h"

namespace kvstore {

inline Napi::Error CodedError(Napi::Env env, const std::string& code, const std::string& message) {
  Napi::Error err = Napi::Error::New(env, message);
  err.Set("code", Napi::String::New(env, code));
  return err;
}

inline void ThrowCoded(Napi::Env env, const std::string& code, const std::string& message) {
  CodedError(env, code, message).ThrowAsJavaScriptException();
}

template <typename Fn>
Napi::Value Guarded(Napi::Env env, Fn&& fn) {
  try {
    return fn();
  } catch (const NativeError& e) {
    ThrowCoded(env, e.code(), e.what());
  } catch (const std::exception& e) {
    ThrowCoded(env, "INTERNAL", e.what());
  } catch (...) {
    ThrowCoded(env, "INTERNAL", "unknown native error");
  }
  return env.Undefined();
}

// Exports a class constructor under `name`; the constructor is kept referenced for the module's
// life (ObjectWrap instances may be created while JS holds no reference to it).
inline Napi::Object ExportClass(Napi::Object exports, const char* name, Napi::Function ctor) {
  new Napi::FunctionReference(Napi::Persistent(ctor));  // never freed: lives as long as the module
  exports.Set(name, ctor);
  return exports;
}

// Argument readers: throw NativeError INVALID_ARGUMENT on a wrong type.
uint64_t ToU64(const Napi::Value& v, const char* what);
std::string ToStr(const Napi::Value& v, const char* what);

Napi::Object InitMemory(Napi::Env env, Napi::Object exports);
Napi::Object InitEngine(Napi::Env env, Napi::Object exports);
Napi::Object InitBench(Napi::Env env, Napi::Object exports);
Napi::Object InitResultArena(Napi::Env env, Napi::Object exports);
Napi::Object InitChecksum(Napi::Env env, Napi::Object exports);
Napi::Object InitFileLock(Napi::Env env, Napi::Object exports);
Napi::Object InitPeerCredentials(Napi::Env env, Napi::Object exports);

}  // namespace kvstore
