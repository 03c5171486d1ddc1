#include "backends/tcp/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <vector>

#include "core/error.h"

namespace collie::tcp {

Nonce fresh_nonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1)
    throw Error(ErrorKind::kTransport, OpContext{}, "no random bytes for a handshake nonce (OpenSSL RAND_bytes failed)");
  return n;
}

Mac prove(const std::string& token, std::string_view label, std::span<const std::uint8_t> transcript) {
  std::vector<std::uint8_t> msg(label.begin(), label.end());
  msg.insert(msg.end(), transcript.begin(), transcript.end());
  Mac mac{};
  unsigned int len = 0;
  static const std::uint8_t kEmpty = 0;
  const void* key = token.empty() ? static_cast<const void*>(&kEmpty) : static_cast<const void*>(token.data());
  if (!HMAC(EVP_sha256(), key, static_cast<int>(token.size()), msg.data(), msg.size(), mac.data(), &len) ||
      len != mac.size())
    throw Error(ErrorKind::kTransport, OpContext{}, "HMAC-SHA256 failed (OpenSSL)");
  return mac;
}

bool verify(const std::string& token, std::string_view label, std::span<const std::uint8_t> transcript,
            std::span<const std::uint8_t> mac) {
  if (mac.size() != kMacBytes) return false;
  const Mac want = prove(token, label, transcript);
  return CRYPTO_memcmp(want.data(), mac.data(), kMacBytes) == 0;
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (std::uint8_t b : bytes) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

std::string random_token() { return to_hex(fresh_nonce()) + to_hex(fresh_nonce()); }

}  // namespace collie::tcp
