// TcpServer (see tcp_server.h). Thread per connection: a connection carries one request at a
// time, so a blocking thread is the shortest path from recv() to the reply (no hand-off).
#include "tcp_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "native_error.h"
#include "wire.h"

namespace kvstore {

int TcpServer::Start(const std::string& host, int min_port, int max_port, int start_offset) {
  if (min_port < 1 || max_port > 65535 || min_port > max_port) {
    throw NativeError("INVALID_ARGUMENT", "port range " + std::to_string(min_port) + ".." + std::to_string(max_port) + " is invalid");
  }
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  struct addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), "0", &hints, &res);
  if (rc != 0) throw NativeError("CONNECTION_FAILED", "resolve listen host '" + host + "': " + gai_strerror(rc));
  const int span = max_port - min_port + 1;
  int last_err = 0;
  for (int i = 0; i < span; ++i) {
    const int port = min_port + (start_offset + i) % span;
    UniqueFd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) { last_err = errno; break; }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_storage addr {};
    std::memcpy(&addr, res->ai_addr, res->ai_addrlen);
    if (addr.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&addr)->sin_port = htons(static_cast<uint16_t>(port));
    else reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), res->ai_addrlen) != 0) { last_err = errno; continue; }
    if (::listen(fd.get(), 512) != 0) { last_err = errno; continue; }
    ::freeaddrinfo(res);
    listener_.Start(std::move(fd));
    return port;
  }
  ::freeaddrinfo(res);
  throw NativeError("CONNECTION_FAILED", ErrnoMessage("no free port in " + std::to_string(min_port) + ".." +
                                                          std::to_string(max_port) + " on " + host +
                                                          " (MC_STORE_CLIENT_MIN_PORT/MC_STORE_CLIENT_MAX_PORT)", last_err));
}

void TcpServer::Stop() { listener_.Stop(); }

void TcpServer::Serve(int fd) {
  std::vector<char> scratch;
  int err = 0;
  for (;;) {
    RequestHeader req;
    if (RecvAll(fd, &req, sizeof req, &err, /*idle_ok=*/true) != IoStatus::kOk) break;
    const bool known_op = req.op == static_cast<uint16_t>(WireOp::kRead) || req.op == static_cast<uint16_t>(WireOp::kWrite);
    if (req.magic != kRequestMagic || !known_op || req.length > kMaxChunkOnWire) break;  // not our protocol: drop
    ResponseHeader resp{kResponseMagic, static_cast<int32_t>(WireStatus::kOk), req.request_id, 0};
    const bool in_op = req.address >= req.range_start && req.address + req.length >= req.address &&
                       req.address + req.length <= req.range_start + req.range_length;
    bool ok = true;
    {
      auto lock = regions_->Lock();
      const bool allowed = in_op && regions_->ContainsLocked(req.range_start, req.range_length);
      char* target = reinterpret_cast<char*>(static_cast<uintptr_t>(req.address));
      if (req.op == static_cast<uint16_t>(WireOp::kWrite)) {
        if (allowed) {
          ok = RecvAll(fd, target, req.length, &err) == IoStatus::kOk;
        } else {
          // Refuse: swallow the payload into scratch so the connection stays in step.
          resp.status = static_cast<int32_t>(in_op ? WireStatus::kOutOfRange : WireStatus::kBadRequest);
          scratch.resize(1 << 16);
          uint64_t left = req.length;
          while (ok && left > 0) {
            size_t n = left < scratch.size() ? left : scratch.size();
            ok = RecvAll(fd, scratch.data(), n, &err) == IoStatus::kOk;
            left -= n;
          }
        }
        if (ok) ok = SendAll(fd, &resp, sizeof resp, &err) == IoStatus::kOk;
      } else if (allowed) {
        resp.length = req.length;
        struct iovec iov[2] = {{&resp, sizeof resp}, {target, req.length}};
        ok = SendAllV(fd, iov, 2, &err) == IoStatus::kOk;
      } else {
        resp.status = static_cast<int32_t>(in_op ? WireStatus::kOutOfRange : WireStatus::kBadRequest);
        ok = SendAll(fd, &resp, sizeof resp, &err) == IoStatus::kOk;
      }
    }
    if (!ok) break;
  }
}

}  // namespace kvstore
