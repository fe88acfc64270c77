// The errors of a refused chunk, the same for every transport (TCP reply status, shm grant and
// fence page, this engine's own regions): nothing of the chunk moved when they are thrown.
#pragma once
#include <cstdint>
#include <string>

#include "native_error.h"
#include "region_table.h"

namespace kvstore {

inline std::string RangeText(uint64_t start, uint64_t length) {
  return "[" + std::to_string(start) + ", +" + std::to_string(length) + ")";
}

[[noreturn]] inline void ThrowOutOfRange(const std::string& endpoint, uint64_t start, uint64_t length) {
  throw NativeError("ADDRESS_OUT_OF_RANGE", "peer " + endpoint + " refused remote range " + RangeText(start, length) +
                                                ": outside its served regions");
}

[[noreturn]] inline void ThrowStale(const std::string& endpoint, uint64_t start, uint64_t length, uint64_t incarnation) {
  throw NativeError("STALE_REGION", "peer " + endpoint + " refused remote range " + RangeText(start, length) +
                                        ": its region is no longer incarnation " + std::to_string(incarnation) +
                                        " (unregistered or registered again since)");
}

[[noreturn]] inline void ThrowFenced(const std::string& endpoint, uint64_t start, uint64_t length, uint64_t generation) {
  throw NativeError("FENCED", "peer " + endpoint + " refused the write of generation " + std::to_string(generation) +
                                  " into " + RangeText(start, length) + ": fenced (placement revoked or superseded)");
}

// Throws the error for a refusing verdict; returns on kOk.
inline void ThrowUnlessOk(RegionTable::Verdict v, const std::string& endpoint, uint64_t start, uint64_t length,
                          uint64_t incarnation, uint64_t generation) {
  switch (v) {
    case RegionTable::Verdict::kOk: return;
    case RegionTable::Verdict::kOutOfRange: ThrowOutOfRange(endpoint, start, length);
    case RegionTable::Verdict::kStale: ThrowStale(endpoint, start, length, incarnation);
    case RegionTable::Verdict::kFenced: ThrowFenced(endpoint, start, length, generation);
  }
}

}  // namespace kvstore
