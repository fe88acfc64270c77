// AuthKey, AuthProof, HmacSha256, MacEquals, RandomNonce (see auth_proof.h).
#include "auth_proof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "native_error.h"

namespace kvstore {

AuthKey::AuthKey(const void* bytes, size_t length) : bytes_(new unsigned char[length > 0 ? length : 1]), length_(length) {
  if (length < kAuthMinSecretBytes) {
    throw NativeError("INVALID_ARGUMENT", "authSecret must be at least " + std::to_string(kAuthMinSecretBytes) + " bytes, got " +
                                              std::to_string(length));
  }
  std::memcpy(bytes_.get(), bytes, length);
}

AuthKey::~AuthKey() { OPENSSL_cleanse(bytes_.get(), length_); }

void HmacSha256(const void* key, size_t key_len, const void* data, size_t data_len, unsigned char out[kAuthMacBytes]) {
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key, static_cast<int>(key_len), static_cast<const unsigned char*>(data), data_len, out, &len) ||
      len != kAuthMacBytes) {
    throw NativeError("INTERNAL", "HMAC-SHA256 failed");
  }
}

void AuthProof(const AuthKey& key, AuthRole role, const std::string& iface, const unsigned char* ns, const unsigned char* nc,
               unsigned char out[kAuthMacBytes]) {
  std::string msg = role == AuthRole::kClient ? "kvstore-auth-v1 client " : "kvstore-auth-v1 server ";
  msg += iface;
  msg.append(reinterpret_cast<const char*>(ns), kAuthNonceBytes);
  msg.append(reinterpret_cast<const char*>(nc), kAuthNonceBytes);
  HmacSha256(key.data(), key.size(), msg.data(), msg.size(), out);
}

bool MacEquals(const unsigned char* a, const unsigned char* b) { return CRYPTO_memcmp(a, b, kAuthMacBytes) == 0; }

void RandomNonce(unsigned char out[kAuthNonceBytes]) {
  size_t got = 0;
  while (got < kAuthNonceBytes) {
    const ssize_t n = ::getrandom(out + got, kAuthNonceBytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw NativeError("INTERNAL", ErrnoMessage("getrandom for an authentication nonce", errno));
    got += static_cast<size_t>(n);
  }
}

}  // namespace kvstore
