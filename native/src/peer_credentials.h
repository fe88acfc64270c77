// Who is at the other end of a local (Unix) socket, and whether that user may be handed this
// process's memory: the same-host shm transport passes fds of whole segments, read-write, so only
// peers running as an allowed uid receive them (by default this process's effective uid and root,
// which can reach any process's memory anyway: common/peer-uids.ts).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kvstore {

struct PeerCredentials {
  uint32_t pid = 0, uid = 0, gid = 0;
};

// SO_PEERCRED of a connected Unix socket; false when the kernel does not say (not a Unix socket).
bool ReadPeerCredentials(int fd, PeerCredentials* out);

// The rule, pure: `uid` is one of `allowed`; an empty list means this process's effective uid and root.
bool PeerUidAllowed(uint32_t uid, const std::vector<uint32_t>& allowed);

// The allowed uids as text for log lines ("1000" or "1000,1001").
std::string UidListText(const std::vector<uint32_t>& allowed);

}  // namespace kvstore
