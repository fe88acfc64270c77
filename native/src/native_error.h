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
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

// "what failed: strerror(errno) (ENAME)"
std::string ErrnoMessage(const std::string& what, int err);

}  // namespace kvstore
