// The one exception type the native core throws; entry points turn it into a JS Error whose
// `code` is `code` (no exception ever crosses N-API).
#pragma once
#include <stdexcept>
#include <string>

namespace kvstore {

class NativeError : public std::runtime_error {
 public:
  NativeError(std::string code, const std::string& message)
      : std::runtime_error(message), code_(std::move(code)) {}
  // A failure on this side while a chunk ran (engine closed, out of threads or descriptors), not
  // with the peer or the path to it: a failed batch names the peers of the other failures only.
  static NativeError Local(std::string code, const std::string& message) {
    NativeError e(std::move(code), message);
    e.local_ = true;
    return e;
  }
  const std::string& code() const { return code_; }
  bool local() const { return local_; }

 private:
  std::string code_;
  bool local_ = false;
};

// "what failed: strerror(errno) (ENAME)"
std::string ErrnoMessage(const std::string& what, int err);

}  // namespace kvstore
