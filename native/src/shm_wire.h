// Control protocol of the same-host shm transport (version 2), over an abstract Unix socket named
// after the engine's TCP endpoint: "give me the fd behind served range [address, +length)". The
// answer carries the served region's bounds and incarnation and, when OK, three fds (SCM_RIGHTS):
// the mapping's, the peer's region-generation page (its counter moves whenever a granted region
// goes away: grants then expire) and the region's write-fence page (fence_page.h).
#pragma once
#include <cstdint>
#include <string>

namespace kvstore {

constexpr uint32_t kShmRequestMagic = 0x3251534B;   // "KSQ2"
constexpr uint32_t kShmResponseMagic = 0x3241534B;  // "KSA2"
constexpr uint32_t kShmAuthHelloMagic = 0x3148534B; // "KSH1": a client with the cluster secret opens with it
constexpr int kShmGrantFds = 3;                     // mapping, generation page, fence page

enum class ShmStatus : int32_t { kOk = 0, kOutOfRange = 1, kNotShareable = 3, kUnauthenticated = 4 };

#pragma pack(push, 1)
struct ShmRequest {
  uint32_t magic;
  uint32_t reserved;
  uint64_t address;
  uint64_t length;
};
struct ShmResponse {
  uint32_t magic;
  int32_t status;
  uint64_t region_start;  // the served region holding the range
  uint64_t region_length;
  uint64_t map_base;      // the fd-backed mapping holding the region (peer's addresses)
  uint64_t map_length;
  uint64_t file_offset;   // of map_base within the fd
  uint64_t generation;    // the peer's region generation when this answer was made
  uint64_t incarnation;   // of the served region
};
#pragma pack(pop)

// Abstract socket name (leading NUL) for an engine endpoint; scoped to the network namespace,
// which is what "same host / same pod" means for sharing memory here.
inline std::string ShmControlName(const std::string& endpoint) { return std::string(1, '\0') + "kvstore-te/" + endpoint; }

}  // namespace kvstore
