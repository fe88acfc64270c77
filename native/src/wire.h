// The TCP transfer protocol, version 2: fixed little-endian headers. A request names one chunk
// [address, address+length) of the remote op range [range_start, range_start+range_length), the
// incarnation the sender expects the remote region to have (0: not checked) and, for a WRITE,
// the placement's generation that the region's write fence judges. WRITE payload follows the
// request, READ payload follows an OK response. Version 1 (magic "KVRQ", 48-byte request) is not
// accepted: its magic differs, so an old peer's request closes the connection, never misread.
#pragma once
#include <cstdint>

namespace kvstore {

constexpr uint32_t kRequestMagicV1 = 0x4B565251;  // "KVRQ": the old format, refused
constexpr uint32_t kRequestMagic = 0x3252564B;    // "KVR2"
constexpr uint32_t kResponseMagic = 0x3250564B;   // "KVP2"
// With the cluster secret, a client opens each connection with this instead of a request
// (auth_handshake.h): "KVA1".
constexpr uint32_t kAuthHelloMagic = 0x3141564B;
constexpr uint64_t kMaxChunkOnWire = 1ull << 30;  // larger requests are protocol errors

enum class WireOp : uint16_t { kRead = 1, kWrite = 2 };

enum class WireStatus : int32_t {
  kOk = 0,
  kOutOfRange = 1,  // no served region holds the op's range
  kBadRequest = 2,  // the chunk lies outside its own op range
  kStale = 3,       // the region's incarnation is not the one the request expects
  kFenced = 4,      // the region's write fence refuses the WRITE's generation
  kUnauthenticated = 5,  // the peer needs the cluster secret's handshake first (or has no secret): closed
};

#pragma pack(push, 1)
struct RequestHeader {
  uint32_t magic;
  uint16_t op;
  uint16_t reserved;
  uint64_t request_id;
  uint64_t address;       // first byte of this chunk on the serving side
  uint64_t length;        // bytes in this chunk
  uint64_t range_start;   // the whole op's remote range, checked as one so an op is all-or-nothing
  uint64_t range_length;
  uint64_t incarnation;   // expected incarnation of the remote region; 0 = not checked
  uint64_t generation;    // WRITE: the placement's generation (write fence); 0 = none
};
struct ResponseHeader {
  uint32_t magic;
  int32_t status;
  uint64_t request_id;
  uint64_t length;
};
#pragma pack(pop)

static_assert(sizeof(RequestHeader) == 64, "request header is 64 bytes");
static_assert(sizeof(ResponseHeader) == 24, "response header is 24 bytes");

}  // namespace kvstore
