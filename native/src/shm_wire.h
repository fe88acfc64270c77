// Control protocol of the same-host shm transport, over an abstract Unix socket named after the
// engine's TCP endpoint: "give me the fd behind registered range [address, +length)". The answer
// carries the registered region's bounds and, when OK, two fds (SCM_RIGHTS): the mapping's and the
// peer's region-generation page, whose counter moves on every unregister (grants then expire).
#pragma once
#include <cstdint>
#include <string>

namespace kvstore {

constexpr uint32_t kShmRequestMagic = 0x4B565351;   // "KVSQ"
constexpr uint32_t kShmResponseMagic = 0x4B565341;  // "KVSA"

enum class ShmStatus : int32_t { kOk = 0, kOutOfRange = 1, kNotShareable = 3 };

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
  uint64_t region_start;  // the registered region holding the range
  uint64_t region_length;
  uint64_t map_base;      // the fd-backed mapping holding the region (peer's addresses)
  uint64_t map_length;
  uint64_t file_offset;   // of map_base within the fd
  uint64_t generation;    // the peer's region generation when this answer was made
};
#pragma pack(pop)

// Abstract socket name (leading NUL) for an engine endpoint; scoped to the network namespace,
// which is what "same host / same pod" means for sharing memory here.
inline std::string ShmControlName(const std::string& endpoint) { return std::string(1, '\0') + "kvstore-te/" + endpoint; }

}  // namespace kvstore
