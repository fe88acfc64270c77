// CopyStreaming (see stream_copy.h): SSE2, part of every x86-64 CPU, so no target attributes.
#include "stream_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace kvstore {

void CopyStreaming(void* dst, const void* src, size_t len) {
#if defined(__x86_64__)
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  // Up to the first 64-byte line boundary of dst with ordinary stores: no streaming store then
  // covers part of a line (partial lines make the write-combining buffers go to memory half full).
  const size_t head = std::min(len, (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64);
  std::memcpy(d, s, head);
  d += head, s += head, len -= head;
  for (; len >= 64; d += 64, s += 64, len -= 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  _mm_sfence();  // streaming stores are weakly ordered: make them visible before we return
  std::memcpy(d, s, len);
#else
  std::memcpy(dst, src, len);
#endif
}

}  // namespace kvstore
