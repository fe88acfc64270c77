// Blocking socket helpers for the C++ I/O threads: whole-buffer send/recv with EINTR handling
// and timeout reporting, socket tuning, endpoint parsing and connecting.
#pragma once
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <string>

#include "unique_fd.h"

namespace kvstore {

enum class IoStatus { kOk, kClosed, kTimeout, kError };

struct SocketTuning {
  int timeout_ms = 10000;    // SO_RCVTIMEO / SO_SNDTIMEO (also bounds connect); 0 = none
  int buffer_bytes = 4 << 20;  // SO_SNDBUF / SO_RCVBUF; 0 = kernel autotuning
};

void TuneSocket(int fd, const SocketTuning& t);
void SetSocketTimeout(int fd, int timeout_ms);
// Reads exactly len bytes. With idle_ok, a timeout before the first byte keeps waiting.
IoStatus RecvAll(int fd, void* buf, size_t len, int* err, bool idle_ok = false);
// Sends all iovecs (modified in place).
IoStatus SendAllV(int fd, struct iovec* iov, int iovcnt, int* err);
IoStatus SendAll(int fd, const void* buf, size_t len, int* err);

// "host:port" or "[v6]:port" -> connected socket. Throws NativeError CONNECTION_FAILED.
UniqueFd ConnectEndpoint(const std::string& endpoint, const SocketTuning& t);
bool SplitEndpoint(const std::string& endpoint, std::string* host, std::string* port);

}  // namespace kvstore
