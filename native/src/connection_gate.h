// Admission of accepted connections for one engine: at most `max_total` open at once and at most
// `max_per_peer` from one peer (an IP address for TCP, a process id for the Unix control socket).
// A connection over a cap is refused (the listener closes it at once) and counted.
#pragma once
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine_counters.h"

namespace kvstore {

class ConnectionGate {
 public:
  ConnectionGate(size_t max_total, size_t max_per_peer, EngineCounters* counters)
      : max_total_(max_total), max_per_peer_(max_per_peer), counters_(counters) {}
  // True (and counted open) when `peer` may have one more connection; false counts a refusal.
  bool Admit(const std::string& peer);
  // The admitted connection from `peer` closed.
  void Leave(const std::string& peer);
  EngineCounters* counters() const { return counters_; }

 private:
  const size_t max_total_, max_per_peer_;
  EngineCounters* counters_;
  std::mutex mu_;
  size_t open_ = 0;
  std::unordered_map<std::string, size_t> per_peer_;
};

}  // namespace kvstore
