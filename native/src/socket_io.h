// Socket helpers for the C++ I/O threads: whole-buffer send/recv with EINTR handling, either
// blocking (per-call SO_RCVTIMEO/SO_SNDTIMEO) or bounded by a deadline for the whole buffer (so a
// peer trickling one byte at a time cannot hold a thread past it), socket tuning, endpoint
// parsing and connecting.
#pragma once
#include <sys/socket.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
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

// Deadline-bounded forms, so a peer trickling one byte at a time cannot hold a thread: the whole
// buffer must move before `deadline`. Reads block in recv() on a socket whose SO_RCVTIMEO is set
// (TuneSocket / SetSocketTimeout): each wait ends after at most that long and the deadline is
// checked after every recv(), so a read ends at most one SO_RCVTIMEO past its deadline, with one
// syscall per recv in the common case. Sends are non-blocking (MSG_DONTWAIT) and wait in poll()
// only for the time left.
using Deadline = std::chrono::steady_clock::time_point;
inline Deadline DeadlineIn(int ms) { return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms); }
IoStatus RecvAllBy(int fd, void* buf, size_t len, Deadline deadline, int* err);
// At least one byte (up to len) by the deadline; *got = bytes read.
IoStatus RecvSomeBy(int fd, void* buf, size_t len, Deadline deadline, size_t* got, int* err);
IoStatus SendAllVBy(int fd, struct iovec* iov, int iovcnt, Deadline deadline, int* err);
IoStatus SendAllBy(int fd, const void* buf, size_t len, Deadline deadline, int* err);
// Sends `prefix` (a reply header, held back with MSG_MORE so it leaves with the first bytes of the
// file), then [offset, +len) of `file` with sendfile(): the kernel reads the file through its page
// cache (its read-ahead state, not a mapping's read-around) and the socket takes the page-cache
// pages without a copy here. sendfile() blocks the socket up to its SO_SNDTIMEO, so like a read
// this ends at most that long past `deadline`. A file that cannot be spliced (EINVAL, ENOSYS,
// EOPNOTSUPP before any of its bytes went) sets *unsupported and returns kOk having sent the
// prefix only: the caller sends the bytes another way. A file shorter than the range is kError
// with *err EIO.
IoStatus SendPrefixAndFileBy(int fd, const void* prefix, size_t prefix_len, int file, uint64_t offset, uint64_t len,
                             Deadline deadline, int* err, bool* unsupported);

// "host:port" or "[v6]:port" -> connected socket. Throws NativeError CONNECTION_FAILED (local()
// when no socket could be made here).
UniqueFd ConnectEndpoint(const std::string& endpoint, const SocketTuning& t);
bool SplitEndpoint(const std::string& endpoint, std::string* host, std::string* port);

}  // namespace kvstore
