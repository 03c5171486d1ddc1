// The rendezvous's messages (docs/wire.md), apart from the sockets that
// carry them, so that they can be checked byte by byte.
//
//   rank 0 -> worker   challenge: magic "CLRC", version (u32), nonce
//   worker -> rank 0   registration: magic "CLRV", version, rank, world,
//                      data port (u32 each), nonce; then a proof over the
//                      challenge and the registration
//   rank 0 -> worker   reply: status (u8, 0 ok), body length (u32), body (the
//                      address table, or an error text), then a proof over
//                      the registration and everything before it
// All integers little-endian. The address table is, per rank in order, a
// port (u16), a host length (u8) and the host's bytes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/tcp/auth.h"

namespace collie::tcp {

struct PeerAddress {
  std::string host;  // at most kMaxHostBytes
  std::uint16_t port = 0;
};

namespace rendezvous_wire {

inline constexpr std::uint32_t kRegisterMagic = 0x56524c43;   // "CLRV"
inline constexpr std::uint32_t kChallengeMagic = 0x43524c43;  // "CLRC"
inline constexpr std::uint32_t kVersion = 2;
inline constexpr std::size_t kChallengeBytes = 8 + kNonceBytes;
inline constexpr std::size_t kRegisterBytes = 20 + kNonceBytes;
inline constexpr std::size_t kReplyHeadBytes = 5;
inline constexpr std::size_t kMaxHostBytes = 255;
inline constexpr std::string_view kRegisterProof = "collie v2 rendezvous registration";
inline constexpr std::string_view kTableProof = "collie v2 rendezvous address table";
inline constexpr std::string_view kFileProof = "collie v2 rendezvous file entry";

using Challenge = std::array<std::uint8_t, kChallengeBytes>;
using RegisterBytes = std::array<std::uint8_t, kRegisterBytes>;

struct Registration {
  std::uint32_t version = kVersion;
  int rank = -1, world = 0;
  std::uint32_t port = 0;  // as sent: a receiver refuses one above 65535
  Nonce nonce{};
};

Challenge encode_challenge(const Nonce& nonce);
// Whether the bytes start a challenge (magic; any version).
bool is_challenge(const Challenge& bytes);

RegisterBytes encode(const Registration& r);
// Empty when the magic is wrong (not a collie rank: ignore it). The version
// is returned as sent, for the caller to refuse with a message.
std::optional<Registration> decode_registration(const RegisterBytes& bytes);

// The longest body a reply to a world of `world` ranks can have: a full
// address table, or an error text of at most 4 KiB. Longer claims are
// refused before anything is allocated.
std::uint64_t max_reply_body_bytes(int world);

// The reply to `reg`: status, body length, body, proof.
std::vector<std::uint8_t> encode_reply(const std::string& token, const RegisterBytes& reg, bool ok,
                                       const std::string& body);
// The body length a reply's head claims.
std::uint32_t reply_body_bytes(const std::array<std::uint8_t, kReplyHeadBytes>& head);
// Whether `mac` proves the reply (head and body) to `reg` under `token`.
bool verify_reply(const std::string& token, const RegisterBytes& reg,
                  const std::array<std::uint8_t, kReplyHeadBytes>& head, std::span<const std::uint8_t> body,
                  std::span<const std::uint8_t> mac);

// The address table; throws std::invalid_argument for a host longer than
// kMaxHostBytes.
std::string encode_address_table(const std::vector<PeerAddress>& peers);
// Exactly `world` entries filling the body, else empty.
std::optional<std::vector<PeerAddress>> parse_address_table(std::span<const std::uint8_t> body, int world);

}  // namespace rendezvous_wire
}  // namespace collie::tcp
