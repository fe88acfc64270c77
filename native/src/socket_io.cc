// Socket helpers (see socket_io.h).
#include "socket_io.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>

#include "native_error.h"

namespace kvstore {

void SetSocketTimeout(int fd, int timeout_ms) {
  struct timeval tv {};
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = (timeout_ms % 1000) * 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void TuneSocket(int fd, const SocketTuning& t) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (t.buffer_bytes > 0) {
    int b = t.buffer_bytes;
    // As root the FORCE variants pass net.core.[rw]mem_max; otherwise the plain ones cap there.
    if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &b, sizeof b) != 0) ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof b);
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &b, sizeof b) != 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
  }
  if (t.timeout_ms > 0) SetSocketTimeout(fd, t.timeout_ms);
}

IoStatus RecvAll(int fd, void* buf, size_t len, int* err, bool idle_ok) {
  char* p = static_cast<char*>(buf);
  size_t got = 0;
  while (got < len) {
    ssize_t n = ::recv(fd, p + got, len - got, 0);
    if (n > 0) { got += static_cast<size_t>(n); continue; }
    if (n == 0) return IoStatus::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (idle_ok && got == 0) continue;
      *err = errno;
      return IoStatus::kTimeout;
    }
    *err = errno;
    return IoStatus::kError;
  }
  return IoStatus::kOk;
}

IoStatus SendAllV(int fd, struct iovec* iov, int iovcnt, int* err) {
  while (iovcnt > 0) {
    struct msghdr msg {};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iovcnt);
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return (errno == EAGAIN || errno == EWOULDBLOCK) ? IoStatus::kTimeout : IoStatus::kError;
    }
    size_t left = static_cast<size_t>(n);
    while (iovcnt > 0 && left >= iov->iov_len) { left -= iov->iov_len; ++iov; --iovcnt; }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return IoStatus::kOk;
}

IoStatus SendAll(int fd, const void* buf, size_t len, int* err) {
  struct iovec iov { const_cast<void*>(buf), len };
  return SendAllV(fd, &iov, 1, err);
}

namespace {

// Waits for `events` on fd until the deadline: kOk when ready (or in error: the next call says
// which), kTimeout when the deadline passed.
IoStatus WaitUntil(int fd, short events, Deadline deadline, int* err) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return IoStatus::kTimeout;
    struct pollfd p { fd, events, 0 };
    const int n = ::poll(&p, 1, left > 1000000 ? 1000000 : static_cast<int>(left));
    if (n > 0) return IoStatus::kOk;
    if (n == 0) continue;  // re-check the clock: poll() may wake a little early
    if (errno == EINTR) continue;
    *err = errno;
    return IoStatus::kError;
  }
}

}  // namespace

IoStatus RecvSomeBy(int fd, void* buf, size_t len, Deadline deadline, size_t* got, int* err) {
  for (;;) {
    const ssize_t n = ::recv(fd, buf, len, 0);
    if (n > 0) {
      *got = static_cast<size_t>(n);
      return IoStatus::kOk;
    }
    if (n == 0) return IoStatus::kClosed;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      *err = errno;
      return IoStatus::kError;
    }
    // SO_RCVTIMEO passed with nothing read: done if the deadline passed too, else wait again.
    if (std::chrono::steady_clock::now() >= deadline) {
      *err = errno;
      return IoStatus::kTimeout;
    }
  }
}

IoStatus RecvAllBy(int fd, void* buf, size_t len, Deadline deadline, int* err) {
  char* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < len) {
    if (done > 0 && std::chrono::steady_clock::now() >= deadline) return IoStatus::kTimeout;
    size_t got = 0;
    const IoStatus st = RecvSomeBy(fd, p + done, len - done, deadline, &got, err);
    if (st != IoStatus::kOk) return st;
    done += got;
  }
  return IoStatus::kOk;
}

namespace {

IoStatus SendAllVFlags(int fd, struct iovec* iov, int iovcnt, Deadline deadline, int* err, int flags) {
  while (iovcnt > 0) {
    struct msghdr msg {};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iovcnt);
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT | flags);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        *err = errno;
        return IoStatus::kError;
      }
      const IoStatus st = WaitUntil(fd, POLLOUT, deadline, err);
      if (st != IoStatus::kOk) return st;
      continue;
    }
    size_t left = static_cast<size_t>(n);
    while (iovcnt > 0 && left >= iov->iov_len) { left -= iov->iov_len; ++iov; --iovcnt; }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return IoStatus::kOk;
}

}  // namespace

IoStatus SendAllVBy(int fd, struct iovec* iov, int iovcnt, Deadline deadline, int* err) {
  return SendAllVFlags(fd, iov, iovcnt, deadline, err, 0);
}

IoStatus SendAllBy(int fd, const void* buf, size_t len, Deadline deadline, int* err) {
  struct iovec iov { const_cast<void*>(buf), len };
  return SendAllVBy(fd, &iov, 1, deadline, err);
}

IoStatus SendPrefixAndFileBy(int fd, const void* prefix, size_t prefix_len, int file, uint64_t offset, uint64_t len,
                             Deadline deadline, int* err, bool* unsupported) {
  *unsupported = false;
  struct iovec iov { const_cast<void*>(prefix), prefix_len };
  IoStatus st = SendAllVFlags(fd, &iov, 1, deadline, err, len > 0 ? MSG_MORE : 0);
  if (st != IoStatus::kOk) return st;
  off_t at = static_cast<off_t>(offset);
  for (uint64_t left = len; left > 0;) {
    const ssize_t n = ::sendfile(fd, file, &at, left < (1u << 30) ? left : (1u << 30));
    if (n > 0) {
      left -= static_cast<uint64_t>(n);
      if (left > 0 && std::chrono::steady_clock::now() >= deadline) return IoStatus::kTimeout;
      continue;
    }
    if (n == 0) {
      *err = EIO;  // end of file inside the range
      return IoStatus::kError;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      st = WaitUntil(fd, POLLOUT, deadline, err);  // SO_SNDTIMEO ran out: the peer is not reading
      if (st != IoStatus::kOk) return st;
      continue;
    }
    if (left == len && (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
      *unsupported = true;
      return IoStatus::kOk;
    }
    *err = errno;
    return IoStatus::kError;
  }
  return IoStatus::kOk;
}

bool SplitEndpoint(const std::string& endpoint, std::string* host, std::string* port) {
  if (!endpoint.empty() && endpoint[0] == '[') {
    auto close = endpoint.find(']');
    if (close == std::string::npos || close + 1 >= endpoint.size() || endpoint[close + 1] != ':') return false;
    *host = endpoint.substr(1, close - 1);
    *port = endpoint.substr(close + 2);
  } else {
    auto colon = endpoint.rfind(':');
    if (colon == std::string::npos || colon == 0) return false;
    *host = endpoint.substr(0, colon);
    *port = endpoint.substr(colon + 1);
  }
  return !port->empty() && port->find_first_not_of("0123456789") == std::string::npos;
}

UniqueFd ConnectEndpoint(const std::string& endpoint, const SocketTuning& t) {
  std::string host, port;
  if (!SplitEndpoint(endpoint, &host, &port)) {
    throw NativeError("CONNECTION_FAILED", "bad endpoint '" + endpoint + "' (want host:port)");
  }
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) throw NativeError("CONNECTION_FAILED", "resolve " + endpoint + ": " + gai_strerror(rc));
  int last_err = 0;
  bool no_socket = false;  // the last failure was ours (out of descriptors or memory), not the peer's
  for (auto* ai = res; ai; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) { last_err = errno; no_socket = true; continue; }
    TuneSocket(fd.get(), t);
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      return fd;
    }
    last_err = errno;
    no_socket = false;
  }
  ::freeaddrinfo(res);
  if (last_err == EINPROGRESS) last_err = ETIMEDOUT;
  if (no_socket) throw NativeError::Local("CONNECTION_FAILED", ErrnoMessage("socket for " + endpoint, last_err));
  throw NativeError("CONNECTION_FAILED", ErrnoMessage("connect " + endpoint, last_err));
}

}  // namespace kvstore
