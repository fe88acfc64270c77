// N-API export peerCredentials(fd) -> { pid, uid, gid } | null: SO_PEERCRED of a connected Unix
// socket (Node's net module does not expose it), for the store service's dummy-client socket.
#include "addon_util.h"
#include "peer_credentials.h"

namespace kvstore {

namespace {

Napi::Value PeerCredentialsJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(env, [&]() -> Napi::Value {
    if (info.Length() < 1) throw NativeError("INVALID_ARGUMENT", "peerCredentials(fd) needs a file descriptor");
    const uint64_t fd = ToU64(info[0], "fd");
    if (fd > 0x7fffffff) throw NativeError("INVALID_ARGUMENT", "fd is not a file descriptor");
    PeerCredentials cred;
    if (!ReadPeerCredentials(static_cast<int>(fd), &cred)) return env.Null();
    Napi::Object o = Napi::Object::New(env);
    o.Set("pid", Napi::Number::New(env, cred.pid));
    o.Set("uid", Napi::Number::New(env, cred.uid));
    o.Set("gid", Napi::Number::New(env, cred.gid));
    return o;
  });
}

}  // namespace

Napi::Object InitPeerCredentials(Napi::Env env, Napi::Object exports) {
  exports.Set("peerCredentials", Napi::Function::New(env, PeerCredentialsJs, "peerCredentials"));
  return exports;
}

}  // namespace kvstore
