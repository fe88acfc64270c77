// One JS transfer() call on the C++ side: a countdown of chunks and the first error. The last
// chunk to finish hands the batch to the completion callback (exactly once).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace kvstore {

struct Batch;
using BatchDone = std::function<void(std::shared_ptr<Batch>)>;

struct Batch {
  uint64_t id = 0;
  std::atomic<size_t> remaining{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string error_code;  // empty on success
  std::string error_message;

  void Fail(const std::string& code, const std::string& message) {
    std::lock_guard<std::mutex> lk(mu);
    if (error_code.empty()) { error_code = code; error_message = message; }
    failed.store(true);
  }
};

struct Chunk {
  std::shared_ptr<Batch> batch;
  uint16_t op = 0;  // WireOp
  char* local = nullptr;
  uint64_t remote = 0;
  uint64_t length = 0;
  uint64_t range_start = 0;  // the op's whole remote range
  uint64_t range_length = 0;
};

}  // namespace kvstore
