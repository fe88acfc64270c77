// CRC-32C entry points: the pre/post inversion, the choice of backend (once per process, by CPU
// detection or KVSTORE_CRC32C_IMPL), and the combine of two CRCs.
#include "crc32c.h"

#include <cstdlib>
#include <cstring>

#include "crc32c_backend.h"
#include "crc32c_math.h"

namespace kvstore {

namespace {

using UpdateFn = uint32_t (*)(uint32_t, const uint8_t*, size_t);
using CopyUpdateFn = uint32_t (*)(uint32_t, uint8_t*, const uint8_t*, size_t, bool);

struct Backend {
  UpdateFn update;
  CopyUpdateFn copy_update;
};

constexpr Backend kBackends[kCrc32cImplCount] = {
    {crc32c_backend::PortableUpdate, crc32c_backend::PortableCopyUpdate},
    {crc32c_backend::Sse42Update, crc32c_backend::Sse42CopyUpdate},
    {crc32c_backend::Avx512Update, crc32c_backend::Avx512CopyUpdate},
    {crc32c_backend::Arm64Update, crc32c_backend::Arm64CopyUpdate},
};

constexpr const char* kNames[kCrc32cImplCount] = {"portable", "sse42", "avx512", "arm64"};

Crc32cImpl ChooseImpl() {
  Crc32cImpl forced;
  const char* env = std::getenv("KVSTORE_CRC32C_IMPL");
  if (env && *env && Crc32cImplFromName(env, &forced) && Crc32cImplAvailable(forced)) return forced;
  for (Crc32cImpl best : {Crc32cImpl::kAvx512, Crc32cImpl::kSse42, Crc32cImpl::kArm64}) {
    if (Crc32cImplAvailable(best)) return best;
  }
  return Crc32cImpl::kPortable;
}

// Decided at the first call; a function-local static is initialised once even when several
// threads race to it.
const Backend& Active() {
  static const Backend& backend = kBackends[static_cast<int>(Crc32cActiveImpl())];
  return backend;
}

// Whether a copy of `len` bytes uses streaming stores (CopyStores in crc32c.h).
bool Streaming(size_t len, CopyStores stores) { return stores == CopyStores::kStreaming || len >= kStreamingCopyMinBytes; }

}  // namespace

const char* Crc32cImplName(Crc32cImpl impl) { return kNames[static_cast<int>(impl)]; }

bool Crc32cImplFromName(const char* name, Crc32cImpl* out) {
  for (int i = 0; i < kCrc32cImplCount; ++i) {
    if (std::strcmp(name, kNames[i]) == 0) {
      *out = static_cast<Crc32cImpl>(i);
      return true;
    }
  }
  return false;
}

bool Crc32cImplAvailable(Crc32cImpl impl) {
  switch (impl) {
    case Crc32cImpl::kPortable:
      return true;
    case Crc32cImpl::kSse42:
      return crc32c_backend::Sse42Supported();
    case Crc32cImpl::kAvx512:
      return crc32c_backend::Avx512Supported();
    case Crc32cImpl::kArm64:
      return crc32c_backend::Arm64Supported();
  }
  return false;
}

Crc32cImpl Crc32cActiveImpl() {
  static const Crc32cImpl impl = ChooseImpl();
  return impl;
}

const char* Crc32cAvx512CopyMethod() { return crc32c_backend::Avx512PlainCopyName(); }

uint32_t Crc32c(uint32_t crc, const void* data, size_t len) {
  return ~Active().update(~crc, static_cast<const uint8_t*>(data), len);
}

uint32_t CopyCrc32c(uint32_t crc, void* dst, const void* src, size_t len, CopyStores stores) {
  return ~Active().copy_update(~crc, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), len, Streaming(len, stores));
}

uint32_t Crc32cWith(Crc32cImpl impl, uint32_t crc, const void* data, size_t len) {
  return ~kBackends[static_cast<int>(impl)].update(~crc, static_cast<const uint8_t*>(data), len);
}

uint32_t CopyCrc32cWith(Crc32cImpl impl, uint32_t crc, void* dst, const void* src, size_t len, CopyStores stores) {
  return ~kBackends[static_cast<int>(impl)].copy_update(~crc, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), len,
                                                        Streaming(len, stores));
}

// CRC(A||B) = CRC(A) * x^(8|B|) + CRC(B) mod P: the inversions cancel (B's initial ~0 is in
// CRC(B), A's final ~0 is shifted through B's length exactly like the register it replaced).
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, size_t len_b) {
  return crc32c_math::MulModP(crc32c_math::XPowModP(len_b, 3), crc_a) ^ crc_b;
}

}  // namespace kvstore
