// Read-ahead for cold READs of neighbouring ranges of a paged file (paged_file.h).
//
// The TCP serving side reads such a file at random (POSIX_FADV_RANDOM, tcp_server.cc says why),
// so the device reads exactly the pages a READ asks for. Small objects read in the order they lie
// in the file (an SSD-only batch read back in the order it was put, neighbours in the file) then
// cost one small device request each: 64 KiB requests, which the device serves at a fraction of
// its sequential rate (docs/tiers.md "Measured"). A run of neighbouring READs is seen here and
// read ahead of in large steps, so the next objects are in the page cache or on the way when their
// READs come. Scattered READs are left exact.
//
// Plain logic under a mutex (the READs of one file come from several connection threads); the
// caller issues the read-ahead (readahead(2)) outside it.
#pragma once
#include <cstdint>
#include <mutex>

namespace kvstore {

class SequentialReadAhead {
 public:
  // Bytes read ahead at a time: a device's large sequential request.
  static constexpr uint64_t kWindow = 2ull << 20;
  // Neighbouring READs in a row before any read-ahead: a few neighbours among scattered reads
  // read nothing more.
  static constexpr uint32_t kRun = 3;

  struct Range {
    uint64_t offset = 0;
    uint64_t length = 0;  // 0: nothing to read ahead
  };

  // A READ of [offset, offset + length) of the file, whose served part ends at `file_end`: the
  // range to read ahead now (from this READ's own offset, so the device takes them in one request).
  Range OnRead(uint64_t offset, uint64_t length, uint64_t file_end);

 private:
  std::mutex mu_;
  bool seen_ = false;
  uint64_t last_end_ = 0;   // the furthest end among the run's READs
  uint64_t ahead_end_ = 0;  // read ahead up to here (0: nothing in this run)
  uint32_t run_ = 0;        // neighbouring READs in a row
};

}  // namespace kvstore
