// Proving a job token without sending it (HMAC-SHA256 challenge-response).
//
// Every connection of a job -- the rendezvous registration and each peer
// connection -- starts with both sides sending a fresh random nonce. Each
// side then proves it knows the token by sending HMAC(token, label ||
// transcript), where the transcript holds both nonces and both sides'
// claims (rank, world). The label differs by direction, so a proof cannot
// be reflected back; the nonces are fresh, so a proof cannot be replayed.
// The token itself never crosses the wire; an empty token is a valid (and
// well-known) key, for jobs that do not ask for authentication.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace collie::tcp {

inline constexpr std::size_t kNonceBytes = 16;
inline constexpr std::size_t kMacBytes = 32;
using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Mac = std::array<std::uint8_t, kMacBytes>;

// Cryptographically random (OpenSSL RAND_bytes); throws if none can be had.
Nonce fresh_nonce();

// HMAC-SHA256(token, label || transcript).
Mac prove(const std::string& token, std::string_view label, std::span<const std::uint8_t> transcript);

// Whether `mac` is prove(token, label, transcript), compared in constant time.
bool verify(const std::string& token, std::string_view label, std::span<const std::uint8_t> transcript,
            std::span<const std::uint8_t> mac);

// Lowercase hex of `bytes`.
std::string to_hex(std::span<const std::uint8_t> bytes);

// A random token for a job (hex), as `collie launch` generates one.
std::string random_token();

}  // namespace collie::tcp
