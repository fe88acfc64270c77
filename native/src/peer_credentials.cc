// Peer credentials of Unix sockets and the uid rule (see peer_credentials.h).
#include "peer_credentials.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace kvstore {

bool ReadPeerCredentials(int fd, PeerCredentials* out) {
  struct ucred cred {};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred) return false;
  out->pid = static_cast<uint32_t>(cred.pid);
  out->uid = cred.uid;
  out->gid = cred.gid;
  return true;
}

bool PeerUidAllowed(uint32_t uid, const std::vector<uint32_t>& allowed) {
  if (allowed.empty()) return uid == static_cast<uint32_t>(::geteuid()) || uid == 0;
  return std::find(allowed.begin(), allowed.end(), uid) != allowed.end();
}

std::string UidListText(const std::vector<uint32_t>& allowed) {
  if (allowed.empty()) return ::geteuid() == 0 ? "0" : std::to_string(::geteuid()) + ",0";
  std::string s;
  for (uint32_t u : allowed) s += (s.empty() ? "" : ",") + std::to_string(u);
  return s;
}

}  // namespace kvstore
