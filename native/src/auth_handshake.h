// The cluster secret's challenge-response at connection setup, as the transfer engine runs it on
// its own I/O threads (both the TCP transport and the same-host shm control socket), before the
// first request is read or sent:
//   client -> server  hello: the protocol's 4-byte auth magic (a client without the secret sends
//                     its first request instead, whose magic differs)
//   server -> client  Ns (32 random bytes)
//   client -> server  Nc (32 random bytes) + HMAC-SHA256(secret, "kvstore-auth-v1 client " + IF + Ns + Nc)
//   server -> client  HMAC-SHA256(secret, "kvstore-auth-v1 server " + IF + Ns + Nc)
// A refusal during the handshake is the 8-byte frame (response magic, status UNAUTHENTICATED)
// followed by the close; a client reading fewer than 32 bytes before the close tells a refusal
// from a plain close by it. The whole handshake must finish within the configured deadline
// (default 10 s). Once it succeeded the connection carries requests as before: no per-request cost.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "auth_proof.h"
#include "engine_counters.h"
#include "shm_wire.h"
#include "socket_io.h"
#include "wire.h"

namespace kvstore {

// What one protocol contributes: its INTERFACE name and magics.
struct AuthWire {
  const char* iface;               // "transfer-tcp" / "transfer-shm"
  uint32_t hello_magic;            // the client's first 4 bytes when it authenticates
  uint32_t response_magic;         // the refusal frame: this magic, then
  int32_t unauthenticated_status;  // this status (int32, little-endian)
};

// The engine's two interfaces.
inline constexpr AuthWire kTcpAuthWire{"transfer-tcp", kAuthHelloMagic, kResponseMagic, static_cast<int32_t>(WireStatus::kUnauthenticated)};
inline constexpr AuthWire kShmAuthWire{"transfer-shm", kShmAuthHelloMagic, kShmResponseMagic,
                                       static_cast<int32_t>(ShmStatus::kUnauthenticated)};

// One engine's authentication setting, shared by its serving and sending sides.
struct AuthConfig {
  std::shared_ptr<const AuthKey> key;  // null: no handshake (and a peer that asks for one is refused)
  int timeout_ms = 10000;              // the whole handshake, from accept / connect
  EngineCounters* counters = nullptr;  // auth_refused
  std::string engine;                  // this engine's endpoint, for log lines
  bool enabled() const { return key != nullptr; }
};

enum class ServerAuthOutcome {
  kOk,
  kRefused,            // the peer failed (wrong proof, silent, gone): counted and logged here, refusal sent
  kUnauthenticatedPeer,  // its first 4 bytes are not the hello (`first_word`): a peer without the
                       // secret sent its first request; the caller answers in its protocol, counts, logs
};

struct ServerAuthResult {
  ServerAuthOutcome outcome = ServerAuthOutcome::kOk;
  uint32_t first_word = 0;
};

// Server side on an accepted socket. `rcv_timeout_ms`: the socket's SO_RCVTIMEO to restore
// afterwards (the handshake shortens it to its own deadline). `who`: for the log line ("from ...").
ServerAuthResult ServeAuthHandshake(int fd, const AuthConfig& cfg, const AuthWire& wire, int rcv_timeout_ms, const std::string& who);

// Client side on a connected socket. Throws NativeError UNAUTHENTICATED (the peer refused us,
// has no secret, or failed to prove it: the last is counted), TIMEOUT, or TRANSFER_FAILED.
void ClientAuthHandshake(int fd, const AuthConfig& cfg, const AuthWire& wire, int rcv_timeout_ms, const std::string& endpoint);

// The 8-byte refusal frame (best effort, bounded by the deadline).
void SendAuthRefusal(int fd, const AuthWire& wire, Deadline deadline);

// Counts one refusal and writes one line to stderr: "kvstore engine E: refused IF connection
// WHO: WHY" (WHO: "from ip:port", "from pid P uid U", "to host:port"). At most 20 lines per 10 s per process (a port scanner cannot flood the log);
// the count of the others is in the next line that is written.
void CountAuthRefusal(const AuthConfig& cfg, const AuthWire& wire, const std::string& who, const std::string& why);

// The peer of a socket for log lines: "ip:port" for TCP, "pid P uid U" for a Unix socket.
std::string SocketPeerText(int fd);

}  // namespace kvstore
