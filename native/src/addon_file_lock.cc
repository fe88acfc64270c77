// N-API surface of advisory file locks (flock), used for the liveness of dummy clients' region
// files: a dummy client holds a shared lock on each of its files for as long as it lives (the
// kernel drops it when the process dies, however it dies); the real client, when a connection
// ends or at startup, deletes a region file only if it can take the exclusive lock, i.e. when no
// live process holds it. Node has no flock of its own.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

#include "addon_util.h"

namespace kvstore {

namespace {

// lockShared(path) -> fd: opens the file and takes a shared lock without waiting; the lock lives
// until unlockFile(fd). Throws LOCKED when an exclusive lock is held, NOT_FOUND when absent.
Napi::Value LockSharedJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(env, [&]() -> Napi::Value {
    const std::string path = ToStr(info[0], "path");
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      throw NativeError(err == ENOENT ? "NOT_FOUND" : "LOCK_FAILED", ErrnoMessage("open(" + path + ")", err));
    }
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
      int err = errno;
      ::close(fd);
      throw NativeError(err == EWOULDBLOCK ? "LOCKED" : "LOCK_FAILED", ErrnoMessage("flock(" + path + ", LOCK_SH)", err));
    }
    return Napi::Number::New(env, fd);
  });
}

// unlockFile(fd): drops a lock taken by lockShared (closes its descriptor).
Napi::Value UnlockFileJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(env, [&]() -> Napi::Value {
    const uint64_t fd = ToU64(info[0], "fd");
    if (fd > 1u << 30) throw NativeError("INVALID_ARGUMENT", "unlockFile: not a descriptor");
    ::close(static_cast<int>(fd));
    return env.Undefined();
  });
}

// unlinkIfUnlocked(path) -> boolean: deletes the file when no process holds a lock on it (the
// exclusive lock is taken without waiting, the file unlinked, the lock dropped). False when a
// lock is held; true when it was deleted or was already gone.
Napi::Value UnlinkIfUnlockedJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(env, [&]() -> Napi::Value {
    const std::string path = ToStr(info[0], "path");
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return Napi::Boolean::New(env, true);
      throw NativeError("LOCK_FAILED", ErrnoMessage("open(" + path + ")", errno));
    }
    bool gone = false;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) gone = ::unlink(path.c_str()) == 0 || errno == ENOENT;
    ::close(fd);
    return Napi::Boolean::New(env, gone);
  });
}

}  // namespace

Napi::Object InitFileLock(Napi::Env env, Napi::Object exports) {
  exports.Set("lockShared", Napi::Function::New(env, LockSharedJs, "lockShared"));
  exports.Set("unlockFile", Napi::Function::New(env, UnlockFileJs, "unlockFile"));
  exports.Set("unlinkIfUnlocked", Napi::Function::New(env, UnlinkIfUnlockedJs, "unlinkIfUnlocked"));
  return exports;
}

}  // namespace kvstore
