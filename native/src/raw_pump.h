// Benchmark baselines measured in the same run as the engine: a raw TCP pump (plain C++
// send/recv between two processes, one connection) and memcpy. Not used by the data path.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kvstore {

enum class PumpMode : uint64_t { kStream = 0, kPingPong = 1 };

// Starts a background listener on an IPv4 host (for the life of the process); returns its port.
int RawPumpListen(const std::string& host);
// Stream: sends `count` messages of `size` bytes, waits for the receiver's ack.
// Ping-pong: `count` round trips of a 48-byte request answered with `size` bytes.
// Returns elapsed seconds. Throws NativeError.
double RawPumpRun(const std::string& endpoint, size_t size, uint64_t count, PumpMode mode);
// memcpy of `size` bytes, `iterations` times, cycling over `span` bytes of distinct buffers
// (0: one pair, cache-hot once it fits the cache). Returns elapsed seconds.
double MemcpyRun(size_t size, uint64_t iterations, size_t span = 0);

}  // namespace kvstore
