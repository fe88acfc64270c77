// The CRC-32C of each op of a batch (transfer(ops) with `checksum`). The CRC is computed where the
// bytes move anyway (a fused copy, or right before sendmsg / right after recv), chunk by chunk, and
// the chunks of one op finish on different threads in any order: each chunk writes the CRC of its
// own bytes into a slot reserved for it, and when the batch completes the slots of each op are
// joined in offset order with Crc32cCombine. Pure bookkeeping: no I/O, no locks (the batch's
// countdown orders every slot write before Finish()).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvstore {

class OpChecksums {
 public:
  // Reserves one slot per `piece` bytes of every op that asked (ops[i].checksum, ops[i].length;
  // any container of such). piece == 0: one slot per op (a path that moves each op whole).
  // Replaces an earlier plan.
  template <typename Ops>
  void Plan(const Ops& ops, uint64_t piece) {
    piece_ = piece;
    ops_.resize(ops.size());
    size_t slots = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      OpEntry& e = ops_[i];
      e.first = ops[i].checksum ? slots : kNone;
      e.length = ops[i].length;
      e.crc = 0;
      if (ops[i].checksum) slots += Pieces(e.length);
    }
    slots_.assign(slots, 0);
  }
  // Whether a plan is in place (some op asked for its CRC).
  bool active() const { return !ops_.empty(); }
  // The slot of the chunk of op `op` starting at `offset` into the op; nullptr when the op did not
  // ask. Stable until the next Plan().
  uint32_t* Slot(size_t op, uint64_t offset) {
    if (op >= ops_.size() || ops_[op].first == kNone) return nullptr;
    return &slots_[ops_[op].first + (piece_ == 0 ? 0 : offset / piece_)];
  }
  // Joins each op's slots into its CRC (0 for ops that did not ask, and for empty ops).
  void Finish();
  // After Finish(): the number of ops and the CRC of op i.
  size_t size() const { return ops_.size(); }
  uint32_t crc(size_t op) const { return ops_[op].crc; }

 private:
  static constexpr size_t kNone = ~size_t{0};
  struct OpEntry {
    size_t first;     // its first slot, kNone when it did not ask
    uint64_t length;  // bytes
    uint32_t crc;     // set by Finish()
  };
  size_t Pieces(uint64_t length) const {
    if (length == 0) return 0;
    return piece_ == 0 ? 1 : static_cast<size_t>((length + piece_ - 1) / piece_);
  }

  uint64_t piece_ = 0;
  std::vector<OpEntry> ops_;
  std::vector<uint32_t> slots_;
};

}  // namespace kvstore
