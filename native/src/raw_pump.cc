// Raw TCP pump and memcpy baselines (see raw_pump.h).
#include "raw_pump.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "native_error.h"
#include "socket_io.h"
#include "unique_fd.h"

namespace kvstore {

namespace {
struct PumpHeader { uint64_t size; uint64_t count; uint64_t mode; };

// Page-aligned, pre-faulted buffer, like a registered segment.
struct PumpBuffer {
  explicit PumpBuffer(size_t n) : size(n ? n : 1) {
    data = static_cast<char*>(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
    if (data == MAP_FAILED) throw NativeError("MAP_FAILED", "pump buffer");
    std::memset(data, 0x5a, size);
  }
  ~PumpBuffer() { ::munmap(data, size); }
  char* data;
  size_t size;
};

void ServePump(int fd) {
  UniqueFd owned(fd);
  int err = 0;
  PumpHeader h;
  while (RecvAll(fd, &h, sizeof h, &err, true) == IoStatus::kOk) {
    PumpBuffer buf(h.size);
    if (h.mode == static_cast<uint64_t>(PumpMode::kStream)) {
      for (uint64_t i = 0; i < h.count; ++i) {
        if (RecvAll(fd, buf.data, h.size, &err) != IoStatus::kOk) return;
      }
      char ack = 1;
      if (SendAll(fd, &ack, 1, &err) != IoStatus::kOk) return;
    } else {
      char req[48];
      for (uint64_t i = 0; i < h.count; ++i) {
        if (RecvAll(fd, req, sizeof req, &err) != IoStatus::kOk) return;
        if (SendAll(fd, buf.data, h.size, &err) != IoStatus::kOk) return;
      }
    }
  }
}
}  // namespace

int RawPumpListen(const std::string& host) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  struct sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    throw NativeError("INVALID_ARGUMENT", "raw pump: listen host must be an IPv4 address, got '" + host + "'");
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd.get(), 16) != 0) {
    throw NativeError("CONNECTION_FAILED", ErrnoMessage("raw pump listen", errno));
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  int lfd = fd.release();
  std::thread([lfd] {
    SocketTuning t;
    t.timeout_ms = 0;
    for (;;) {
      int c = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) { if (errno == EINTR) continue; return; }
      TuneSocket(c, t);
      std::thread(ServePump, c).detach();
    }
  }).detach();
  return ntohs(addr.sin_port);
}

double RawPumpRun(const std::string& endpoint, size_t size, uint64_t count, PumpMode mode) {
  SocketTuning t;
  t.timeout_ms = 30000;
  UniqueFd fd = ConnectEndpoint(endpoint, t);
  PumpBuffer buf(size);
  int err = 0;
  PumpHeader h{size, count, static_cast<uint64_t>(mode)};
  auto t0 = std::chrono::steady_clock::now();
  if (SendAll(fd.get(), &h, sizeof h, &err) != IoStatus::kOk) throw NativeError("TRANSFER_FAILED", "pump header");
  if (mode == PumpMode::kStream) {
    for (uint64_t i = 0; i < count; ++i) {
      if (SendAll(fd.get(), buf.data, size, &err) != IoStatus::kOk) throw NativeError("TRANSFER_FAILED", "pump send");
    }
    char ack;
    if (RecvAll(fd.get(), &ack, 1, &err) != IoStatus::kOk) throw NativeError("TRANSFER_FAILED", "pump ack");
  } else {
    char req[48] = {};
    for (uint64_t i = 0; i < count; ++i) {
      if (SendAll(fd.get(), req, sizeof req, &err) != IoStatus::kOk) throw NativeError("TRANSFER_FAILED", "pump request");
      if (RecvAll(fd.get(), buf.data, size, &err) != IoStatus::kOk) throw NativeError("TRANSFER_FAILED", "pump reply");
    }
  }
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(t1 - t0).count();
}

double MemcpyRun(size_t size, uint64_t iterations, size_t span) {
  // span > size: copy slot i % slots of two rings of `span` bytes each, so that (with a span above
  // the last-level cache) every copy reads and writes memory that is not cache-hot, as a Get of
  // a value last touched long ago does. span <= size: the same two buffers every time.
  const size_t slots = span > size && size > 0 ? (span + size - 1) / size : 1;
  PumpBuffer a(size * slots), b(size * slots);
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < iterations; ++i) {
    const size_t off = (i % slots) * size;
    std::memcpy(b.data + off, a.data + off, size);
    asm volatile("" ::: "memory");
  }
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(t1 - t0).count();
}

}  // namespace kvstore
