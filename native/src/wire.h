// The TCP transfer protocol: fixed little-endian headers. A request names one chunk
// [address, address+length) of the remote op range [range_start, range_start+range_length);
// WRITE payload follows the request, READ payload follows an OK response.
#pragma once
#include <cstdint>

namespace kvstore {

constexpr uint32_t kRequestMagic = 0x4B565251;   // "KVRQ"
constexpr uint32_t kResponseMagic = 0x4B565250;  // "KVRP"
constexpr uint64_t kMaxChunkOnWire = 1ull << 30; // larger requests are protocol errors

enum class WireOp : uint16_t { kRead = 1, kWrite = 2 };

enum class WireStatus : int32_t { kOk = 0, kOutOfRange = 1, kBadRequest = 2 };

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
};
struct ResponseHeader {
  uint32_t magic;
  int32_t status;
  uint64_t request_id;
  uint64_t length;
};
#pragma pack(pop)

static_assert(sizeof(RequestHeader) == 48, "request header is 48 bytes");
static_assert(sizeof(ResponseHeader) == 24, "response header is 24 bytes");

}  // namespace kvstore
