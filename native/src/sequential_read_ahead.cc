// SequentialReadAhead (see sequential_read_ahead.h).
#include "sequential_read_ahead.h"

#include <algorithm>

namespace kvstore {

SequentialReadAhead::Range SequentialReadAhead::OnRead(uint64_t offset, uint64_t length, uint64_t file_end) {
  const uint64_t end = offset + length;
  std::lock_guard<std::mutex> lock(mu_);
  // A neighbour: READs in flight on several connections arrive in any order, so one may start a
  // little before the furthest end seen (up to 8 objects back) or skip up to two objects ahead.
  const uint64_t back = std::min<uint64_t>(8 * length, kWindow / 2);
  const bool near = seen_ && offset + back >= last_end_ && offset <= last_end_ + 2 * length;
  seen_ = true;
  if (!near) {
    run_ = 0;
    ahead_end_ = 0;
    last_end_ = end;
    return {};
  }
  if (end <= last_end_) return {};  // behind the run (arrived late, or read again): no step
  last_end_ = end;
  if (++run_ < kRun) return {};
  // Read ahead once less than half a window lies ahead of this READ.
  if (ahead_end_ >= end + kWindow / 2 || offset >= file_end) return {};
  const uint64_t from = std::max(ahead_end_, offset);
  const uint64_t to = std::min(from + kWindow, file_end);
  if (to <= from) return {};
  ahead_end_ = to;
  return {from, to - from};
}

}  // namespace kvstore
