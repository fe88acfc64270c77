// The connection handshake of the transfer engine (see auth_handshake.h).
#include "auth_handshake.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "native_error.h"
#include "peer_credentials.h"

namespace kvstore {

namespace {

constexpr size_t kRefusalBytes = 8;

// Reads until `want` bytes, the peer's close, the deadline or an error. kOk: all of them; kClosed:
// the peer closed after *got bytes.
IoStatus RecvUpTo(int fd, unsigned char* buf, size_t want, Deadline deadline, size_t* got, int* err) {
  *got = 0;
  while (*got < want) {
    if (*got > 0 && std::chrono::steady_clock::now() >= deadline) return IoStatus::kTimeout;
    size_t n = 0;
    const IoStatus st = RecvSomeBy(fd, buf + *got, want - *got, deadline, &n, err);
    if (st != IoStatus::kOk) return st;
    *got += n;
  }
  return IoStatus::kOk;
}

bool IsRefusal(const AuthWire& wire, const unsigned char* buf, size_t got) {
  if (got != kRefusalBytes) return false;
  uint32_t magic;
  int32_t status;
  std::memcpy(&magic, buf, 4);
  std::memcpy(&status, buf + 4, 4);
  return magic == wire.response_magic && status == wire.unauthenticated_status;
}

// The handshake's SO_RCVTIMEO: short enough that a blocked read sees the deadline pass.
int HandshakeRcvTimeout(const AuthConfig& cfg, int rcv_timeout_ms) {
  return rcv_timeout_ms > 0 && rcv_timeout_ms < cfg.timeout_ms ? rcv_timeout_ms : cfg.timeout_ms;
}

// Restores the connection's SO_RCVTIMEO when the handshake ends, whichever way.
struct RcvTimeoutScope {
  int fd, restore_ms;
  ~RcvTimeoutScope() { SetSocketTimeout(fd, restore_ms); }
};

}  // namespace

std::string SocketPeerText(int fd) {
  sockaddr_storage addr {};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    char text[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
      ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
      return std::string(text) + ":" + std::to_string(ntohs(a->sin_port));
    }
    if (addr.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
      ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
      return "[" + std::string(text) + "]:" + std::to_string(ntohs(a->sin6_port));
    }
  }
  PeerCredentials cred;
  if (ReadPeerCredentials(fd, &cred)) return "pid " + std::to_string(cred.pid) + " uid " + std::to_string(cred.uid);
  return "an unknown peer";
}

void CountAuthRefusal(const AuthConfig& cfg, const AuthWire& wire, const std::string& who, const std::string& why) {
  if (cfg.counters) EngineCounters::Bump(cfg.counters->auth_refused);
  // A window of 10 s with at most 20 lines; the lines not written are counted into the next one.
  static std::atomic<int64_t> window_start{0};
  static std::atomic<int> in_window{0};
  static std::atomic<uint64_t> suppressed{0};
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t start = window_start.load();
  if (now_s - start >= 10 && window_start.compare_exchange_strong(start, now_s)) in_window.store(0);
  if (in_window.fetch_add(1) >= 20) {
    suppressed.fetch_add(1);
    return;
  }
  const uint64_t skipped = suppressed.exchange(0);
  std::string line = "kvstore engine " + (cfg.engine.empty() ? std::string("(not started)") : cfg.engine) + ": refused " + wire.iface + " connection " + who + ": " + why;
  if (skipped > 0) line += " (" + std::to_string(skipped) + " more refusals not logged)";
  line += "\n";
  std::fputs(line.c_str(), stderr);  // one write: concurrent lines do not interleave; no napi here
}

void SendAuthRefusal(int fd, const AuthWire& wire, Deadline deadline) {
  unsigned char frame[kRefusalBytes];
  std::memcpy(frame, &wire.response_magic, 4);
  std::memcpy(frame + 4, &wire.unauthenticated_status, 4);
  int err = 0;
  SendAllBy(fd, frame, sizeof frame, deadline, &err);
}

ServerAuthResult ServeAuthHandshake(int fd, const AuthConfig& cfg, const AuthWire& wire, int rcv_timeout_ms,
                                    const std::string& who) {
  const Deadline deadline = DeadlineIn(cfg.timeout_ms);
  SetSocketTimeout(fd, HandshakeRcvTimeout(cfg, rcv_timeout_ms));
  RcvTimeoutScope restore{fd, rcv_timeout_ms};
  ServerAuthResult result;
  int err = 0;
  size_t got = 0;
  auto refuse = [&](const std::string& why, bool frame) {
    CountAuthRefusal(cfg, wire, who, why);  // before the peer hears it: its next look at our counters sees it
    if (frame) SendAuthRefusal(fd, wire, deadline);
    result.outcome = ServerAuthOutcome::kRefused;
    return result;
  };
  auto failed_read = [&](IoStatus st, const char* phase) {
    if (st == IoStatus::kTimeout) {
      return refuse("no " + std::string(phase) + " within " + std::to_string(cfg.timeout_ms) + " ms", false);
    }
    return refuse(std::string(st == IoStatus::kClosed ? "closed" : "socket error") + " before its " + phase, false);
  };
  unsigned char hello[4];
  IoStatus st = RecvUpTo(fd, hello, sizeof hello, deadline, &got, &err);
  if (st != IoStatus::kOk) return failed_read(st, "authentication hello");
  std::memcpy(&result.first_word, hello, 4);
  if (result.first_word != wire.hello_magic) {
    result.outcome = ServerAuthOutcome::kUnauthenticatedPeer;
    return result;
  }
  unsigned char ns[kAuthNonceBytes];
  RandomNonce(ns);
  st = SendAllBy(fd, ns, sizeof ns, deadline, &err);
  if (st != IoStatus::kOk) return refuse("it did not take the challenge", false);
  unsigned char answer[kAuthNonceBytes + kAuthMacBytes];
  st = RecvUpTo(fd, answer, sizeof answer, deadline, &got, &err);
  if (st != IoStatus::kOk) return failed_read(st, "authentication proof");
  unsigned char expected[kAuthMacBytes];
  AuthProof(*cfg.key, AuthRole::kClient, wire.iface, ns, answer, expected);
  if (!MacEquals(expected, answer + kAuthNonceBytes)) return refuse("wrong authentication proof (a different authSecret)", true);
  unsigned char proof[kAuthMacBytes];
  AuthProof(*cfg.key, AuthRole::kServer, wire.iface, ns, answer, proof);
  st = SendAllBy(fd, proof, sizeof proof, deadline, &err);
  if (st != IoStatus::kOk) return refuse("it did not take our proof", false);
  return result;
}

void ClientAuthHandshake(int fd, const AuthConfig& cfg, const AuthWire& wire, int rcv_timeout_ms, const std::string& endpoint) {
  const Deadline deadline = DeadlineIn(cfg.timeout_ms);
  SetSocketTimeout(fd, HandshakeRcvTimeout(cfg, rcv_timeout_ms));
  RcvTimeoutScope restore{fd, rcv_timeout_ms};
  const std::string peer = "peer " + endpoint + " (" + wire.iface + ")";
  int err = 0;
  auto fail_io = [&](IoStatus st, const char* phase) {
    if (st == IoStatus::kTimeout) {
      throw NativeError("TIMEOUT", peer + " did not complete the authentication handshake within " + std::to_string(cfg.timeout_ms) +
                                       " ms (" + phase + ")");
    }
    throw NativeError("TRANSFER_FAILED", "authentication handshake with " + peer + " failed while " + phase + ": " +
                                             (st == IoStatus::kClosed ? std::string("connection closed") : ErrnoMessage("socket", err)));
  };
  IoStatus st = SendAllBy(fd, &wire.hello_magic, sizeof wire.hello_magic, deadline, &err);
  if (st != IoStatus::kOk) fail_io(st, "sending the hello");
  unsigned char ns[kAuthNonceBytes];
  size_t got = 0;
  st = RecvUpTo(fd, ns, sizeof ns, deadline, &got, &err);
  if (st == IoStatus::kClosed && IsRefusal(wire, ns, got)) {
    throw NativeError("UNAUTHENTICATED", peer + " runs without authSecret and refused our authenticated connection "
                                                "(every engine of a cluster needs the same cluster secret)");
  }
  if (st == IoStatus::kClosed && got == 0) {
    throw NativeError("UNAUTHENTICATED", peer + " closed the connection at the authentication hello: it does not "
                                                "authenticate (no authSecret, or an older version)");
  }
  if (st != IoStatus::kOk) fail_io(st, "waiting for the challenge");
  unsigned char answer[kAuthNonceBytes + kAuthMacBytes];
  RandomNonce(answer);
  AuthProof(*cfg.key, AuthRole::kClient, wire.iface, ns, answer, answer + kAuthNonceBytes);
  st = SendAllBy(fd, answer, sizeof answer, deadline, &err);
  if (st != IoStatus::kOk) fail_io(st, "sending our proof");
  unsigned char proof[kAuthMacBytes];
  st = RecvUpTo(fd, proof, sizeof proof, deadline, &got, &err);
  if (st == IoStatus::kClosed) {
    throw NativeError("UNAUTHENTICATED", peer + " refused our authentication proof: its authSecret differs from ours");
  }
  if (st != IoStatus::kOk) fail_io(st, "waiting for the peer's proof");
  unsigned char expected[kAuthMacBytes];
  AuthProof(*cfg.key, AuthRole::kServer, wire.iface, ns, answer, expected);
  if (!MacEquals(expected, proof)) {
    CountAuthRefusal(cfg, wire, "to " + endpoint, "it failed to prove the cluster secret");
    throw NativeError("UNAUTHENTICATED", peer + " failed to prove the cluster secret (a different authSecret): connection closed");
  }
}

}  // namespace kvstore
