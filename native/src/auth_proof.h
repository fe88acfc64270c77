// The cryptographic core of the transfer engine's connection handshake (the cluster secret's
// mutual challenge-response, /work/shared auth-protocol: "kvstore-auth-v1"): the secret held in
// memory, the two proofs HMAC-SHA256(secret, "kvstore-auth-v1 client|server " + INTERFACE + Ns +
// Nc), random nonces from getrandom(2) and a constant-time compare. Pure functions, no I/O.
// HMAC and the compare are OpenSSL's (HMAC(), CRYPTO_memcmp): Node ships its headers
// (include/node/openssl, on node-gyp's include path) and exports the symbols from the node binary
// (or, where Node links a shared libcrypto, from that library, already loaded in the process), so
// the addon links no library of its own and needs no hand-written SHA-256.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kvstore {

constexpr size_t kAuthNonceBytes = 32;
constexpr size_t kAuthMacBytes = 32;
constexpr size_t kAuthMinSecretBytes = 32;

// The cluster secret as the engine keeps it: copied in once, wiped when the engine goes.
class AuthKey {
 public:
  // Throws NativeError INVALID_ARGUMENT when shorter than kAuthMinSecretBytes.
  AuthKey(const void* bytes, size_t length);
  ~AuthKey();
  AuthKey(const AuthKey&) = delete;
  AuthKey& operator=(const AuthKey&) = delete;
  const unsigned char* data() const { return bytes_.get(); }
  size_t size() const { return length_; }

 private:
  std::unique_ptr<unsigned char[]> bytes_;
  size_t length_;
};

enum class AuthRole { kClient, kServer };

// HMAC-SHA256(key, "kvstore-auth-v1 client " + iface + ns + nc) (kServer: "... server ...").
void AuthProof(const AuthKey& key, AuthRole role, const std::string& iface, const unsigned char* ns, const unsigned char* nc,
               unsigned char out[kAuthMacBytes]);
// HMAC-SHA256 of one message (the building block; tested against RFC 4231).
void HmacSha256(const void* key, size_t key_len, const void* data, size_t data_len, unsigned char out[kAuthMacBytes]);
// Constant-time equality of two MACs.
bool MacEquals(const unsigned char* a, const unsigned char* b);
// kAuthNonceBytes random bytes (getrandom). Throws NativeError INTERNAL if the kernel gives none.
void RandomNonce(unsigned char out[kAuthNonceBytes]);

}  // namespace kvstore
