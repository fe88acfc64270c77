// ConnectionGate (see connection_gate.h).
#include "connection_gate.h"

namespace kvstore {

bool ConnectionGate::Admit(const std::string& peer) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    size_t& mine = per_peer_[peer];
    if (open_ < max_total_ && mine < max_per_peer_) {
      ++open_;
      ++mine;
      counters_->connections_open.store(open_, std::memory_order_relaxed);
      return true;
    }
    if (mine == 0) per_peer_.erase(peer);
  }
  EngineCounters::Bump(counters_->refused_over_cap);
  return false;
}

void ConnectionGate::Leave(const std::string& peer) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = per_peer_.find(peer);
  if (it != per_peer_.end() && --it->second == 0) per_peer_.erase(it);
  if (open_ > 0) --open_;
  counters_->connections_open.store(open_, std::memory_order_relaxed);
}

}  // namespace kvstore
