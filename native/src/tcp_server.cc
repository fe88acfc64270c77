// TcpServer (see tcp_server.h). Thread per connection: a connection carries one request at a
// time, so a blocking thread is the shortest path from recv() to the reply (no hand-off).
//
// READs of a region mapped from a file on a device (an SSD offload file: paged_file.h) are sent
// from the file with sendfile(), not from the mapping. A page of the mapping that is not in
// memory faults in sendmsg(), and the fault reads the mapping's read-around window around it (the
// device's read-ahead, 8 MiB on the machine measured): a 64 KiB object read at random cost 8 MiB
// of device reads (docs/tiers.md "Measured"). Through the file (opened for random access) the
// kernel reads the pages asked for and nothing more; an op of several chunks asks for its whole
// range with its first chunk, and a run of single-chunk READs of neighbouring ranges is read
// ahead of (sequential_read_ahead.h). A read error fails the request (the connection closes,
// counted in fileReadErrors), and the socket takes the page-cache pages without a copy into it. The bytes
// then leave when the peer takes them rather than when this thread copies them, which is no
// weaker than before: the reader's lease keeps the range from being freed and rewritten until its
// read ends, and it checks the bytes against the CRC-32C the writer recorded (a same-host reader
// copies straight from the mapping on the same terms).
#include "tcp_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "native_error.h"
#include "paged_file.h"
#include "wire.h"

namespace kvstore {

TcpServer::TcpServer(RegionTable* regions, SocketTuning tuning, ServeLimits limits, ConnectionGate* gate, AuthConfig auth)
    : regions_(regions), tuning_(tuning), limits_(limits), counters_(gate->counters()), auth_(std::move(auth)) {
  if (limits_.io_timeout_ms <= 0) limits_.io_timeout_ms = 1 << 30;
  tuning_.timeout_ms = limits_.io_timeout_ms;
  if (limits_.idle_timeout_ms > 0 && limits_.idle_timeout_ms < tuning_.timeout_ms) tuning_.timeout_ms = limits_.idle_timeout_ms;
  listener_.SetGate(gate);
}

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
    auth_.engine = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
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
  if (auth_.enabled() && !Authenticate(fd)) return;
  std::vector<char> scratch;
  while (ServeRequest(fd, &scratch)) {
  }
}

bool TcpServer::Authenticate(int fd) {
  const std::string who = "from " + SocketPeerText(fd);
  const ServerAuthResult r = ServeAuthHandshake(fd, auth_, kTcpAuthWire, tuning_.timeout_ms, who);
  if (r.outcome != ServerAuthOutcome::kUnauthenticatedPeer) return r.outcome == ServerAuthOutcome::kOk;
  if (r.first_word == kRequestMagic) {
    // Counted before the peer hears the refusal: one that reads our counters next must see it.
    CountAuthRefusal(auth_, kTcpAuthWire, who, "a request without authentication (the peer has no authSecret)");
    RefuseRequest(fd, r.first_word);
  } else {
    CountAuthRefusal(auth_, kTcpAuthWire, who, "not an authentication hello (not this protocol, or an older version)");
  }
  return false;
}

void TcpServer::RefuseRequest(int fd, uint32_t magic) {
  // The rest of its header (for the request id), then one reply it understands: UNAUTHENTICATED.
  const Deadline deadline = DeadlineIn(auth_.timeout_ms);
  SetSocketTimeout(fd, auth_.timeout_ms < tuning_.timeout_ms ? auth_.timeout_ms : tuning_.timeout_ms);
  RequestHeader req;
  req.magic = magic;
  int err = 0;
  if (RecvAllBy(fd, reinterpret_cast<char*>(&req) + sizeof magic, sizeof req - sizeof magic, deadline, &err) != IoStatus::kOk) return;
  ResponseHeader resp{kResponseMagic, static_cast<int32_t>(WireStatus::kUnauthenticated), req.request_id, 0};
  if (SendAllBy(fd, &resp, sizeof resp, deadline, &err) != IoStatus::kOk) return;
  // A WRITE's payload may follow: read it away until the peer closes (it does on this status), so
  // our close sends no reset that could destroy the reply before the peer read it.
  ::shutdown(fd, SHUT_WR);
  char sink[4096];
  size_t got = 0;
  while (RecvSomeBy(fd, sink, sizeof sink, deadline, &got, &err) == IoStatus::kOk) {
  }
}

IoStatus TcpServer::SendFromFile(int fd, const ResponseHeader& resp, const PagedFile& file, uint64_t offset, const char* mapped,
                                 uint64_t len, Deadline deadline, int* err) {
  bool unsupported = false;
  IoStatus st = SendPrefixAndFileBy(fd, &resp, sizeof resp, file.fd.get(), offset, len, deadline, err, &unsupported);
  if (st == IoStatus::kOk && unsupported) st = SendAllBy(fd, mapped, len, deadline, err);  // no splice here: from the mapping
  if (st == IoStatus::kError && *err == EIO) EngineCounters::Bump(counters_->file_read_errors);
  return st;
}

void TcpServer::CountFailure(IoStatus st) {
  if (st == IoStatus::kTimeout) EngineCounters::Bump(counters_->closed_io_timeout);
}

bool TcpServer::ServeRequest(int fd, std::vector<char>* scratch) {
  int err = 0;
  RequestHeader req;
  char* raw = reinterpret_cast<char*>(&req);
  // The first bytes may take idleTimeoutMs; the rest of the request, ioTimeoutMs from then.
  size_t got = 0;
  const Deadline idle = limits_.idle_timeout_ms > 0 ? DeadlineIn(limits_.idle_timeout_ms) : Deadline::max();
  IoStatus st = RecvSomeBy(fd, raw, sizeof req, idle, &got, &err);
  if (st == IoStatus::kTimeout) EngineCounters::Bump(counters_->closed_idle);
  if (st != IoStatus::kOk) return false;
  const Deadline deadline = DeadlineIn(limits_.io_timeout_ms);
  for (;;) {
    // Checked as soon as it is in: an old (v1) peer's shorter header must not wait for more bytes.
    if (got >= sizeof req.magic && req.magic != kRequestMagic) {
      if (req.magic == kAuthHelloMagic && !auth_.enabled()) {
        // A peer with the cluster secret: tell it this engine has none (no byte of it is served).
        SendAuthRefusal(fd, kTcpAuthWire, deadline);
        CountAuthRefusal(auth_, kTcpAuthWire, "from " + SocketPeerText(fd), "it asks for authentication and this engine has no authSecret");
        return false;
      }
      EngineCounters::Bump(counters_->bad_requests);
      return false;
    }
    if (got == sizeof req) break;
    if (std::chrono::steady_clock::now() >= deadline) st = IoStatus::kTimeout;
    size_t n = 0;
    if (st == IoStatus::kOk) st = RecvSomeBy(fd, raw + got, sizeof req - got, deadline, &n, &err);
    if (st != IoStatus::kOk) {
      CountFailure(st);
      return false;
    }
    got += n;
  }
  const bool write = req.op == static_cast<uint16_t>(WireOp::kWrite);
  if ((!write && req.op != static_cast<uint16_t>(WireOp::kRead)) || req.length > kMaxChunkOnWire) {
    EngineCounters::Bump(counters_->bad_requests);
    return false;  // not our protocol: drop
  }
  ResponseHeader resp{kResponseMagic, static_cast<int32_t>(WireStatus::kOk), req.request_id, 0};
  const bool in_op = req.address >= req.range_start && req.address + req.length >= req.address &&
                     req.address + req.length <= req.range_start + req.range_length;
  RegionTable::Pin pin;
  if (!in_op) {
    resp.status = static_cast<int32_t>(WireStatus::kBadRequest);
    EngineCounters::Bump(counters_->bad_requests);
  } else {
    switch (regions_->PinRemote(req.range_start, req.range_length, write, req.incarnation, req.generation, &pin)) {
      case RegionTable::Verdict::kOk: break;
      case RegionTable::Verdict::kOutOfRange: resp.status = static_cast<int32_t>(WireStatus::kOutOfRange); break;
      case RegionTable::Verdict::kStale:
        resp.status = static_cast<int32_t>(WireStatus::kStale);
        EngineCounters::Bump(counters_->stale_refused);
        break;
      case RegionTable::Verdict::kFenced:
        resp.status = static_cast<int32_t>(WireStatus::kFenced);
        EngineCounters::Bump(counters_->fenced_refused);
        break;
    }
  }
  char* target = reinterpret_cast<char*>(static_cast<uintptr_t>(req.address));
  if (write) {
    if (pin.held()) {
      st = RecvAllBy(fd, target, req.length, deadline, &err);
      pin.Release();  // bytes are in (or the connection failed): the region may go now
    } else {
      // Refused: swallow the payload (no lock, no region) so the connection stays in step.
      scratch->resize(1 << 16);
      for (uint64_t left = req.length; st == IoStatus::kOk && left > 0;) {
        const size_t n = left < scratch->size() ? left : scratch->size();
        st = RecvAllBy(fd, scratch->data(), n, deadline, &err);
        left -= n;
      }
    }
    if (st == IoStatus::kOk) st = SendAllBy(fd, &resp, sizeof resp, deadline, &err);
  } else if (pin.held()) {
    resp.length = req.length;
    if (const PagedFile* file = pin.file()) {
      // The op's first chunk asks the device for the whole op at once: its other chunks, served
      // by other connections, then find their pages read or on the way. An op of one chunk may
      // be one of a run of neighbours (small objects read in file order): read ahead of the run.
      if (req.address == req.range_start && req.range_length > req.length) {
        ::readahead(file->fd.get(), static_cast<off64_t>(pin.FileOffset(req.range_start)), req.range_length);
      } else if (req.range_length == req.length) {
        const SequentialReadAhead::Range ahead = file->ahead.OnRead(pin.FileOffset(req.address), req.length, file->file_end);
        if (ahead.length > 0) ::readahead(file->fd.get(), static_cast<off64_t>(ahead.offset), ahead.length);
      }
      st = SendFromFile(fd, resp, *file, pin.FileOffset(req.address), target, req.length, deadline, &err);
    } else {
      struct iovec iov[2] = {{&resp, sizeof resp}, {target, req.length}};
      st = SendAllVBy(fd, iov, 2, deadline, &err);
    }
    pin.Release();
  } else {
    st = SendAllBy(fd, &resp, sizeof resp, deadline, &err);
  }
  if (st != IoStatus::kOk) {
    CountFailure(st);
    return false;
  }
  return true;
}

}  // namespace kvstore
