// One JS transfer() call on the C++ side: a countdown of chunks, the first error, the remote
// endpoints whose chunks failed, the CRC-32C slots of the ops that asked for one, and the pins of
// its local ranges (so unregistering a local buffer waits for the batch). The last chunk to
// finish drops the pins, joins the CRCs and hands the batch to the completion callback (exactly
// once).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "op_checksums.h"
#include "region_table.h"

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
  // Remote endpoints whose chunks failed on the peer's side or the path to it, each once (under mu).
  std::vector<std::string> failed_endpoints;
  std::vector<RegionTable::Pin> local_pins;  // set before the chunks are queued, cleared by the last
  OpChecksums checksums;                     // planned before the chunks are queued, when an op asked

  // `endpoint`: the peer to blame, empty for a failure on this side.
  void Fail(const std::string& code, const std::string& message, const std::string& endpoint = std::string()) {
    std::lock_guard<std::mutex> lk(mu);
    if (error_code.empty()) { error_code = code; error_message = message; }
    if (!endpoint.empty() && std::find(failed_endpoints.begin(), failed_endpoints.end(), endpoint) == failed_endpoints.end()) {
      failed_endpoints.push_back(endpoint);
    }
    failed.store(true);
  }
  // Called once by whoever finishes the batch, before the completion is handed over.
  void Complete() {
    if (!failed.load() && checksums.active()) checksums.Finish();
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
  uint64_t incarnation = 0;  // expected incarnation of the remote region (0: any)
  uint64_t generation = 0;   // WRITE: the placement's generation (write fence)
  uint32_t* crc = nullptr;   // where the CRC-32C of this chunk's bytes goes (nullptr: not asked)
  bool stream = false;       // memcpy paths: a chunk of a large op, copied with streaming stores (chunk_copy.h)
};

}  // namespace kvstore
