// collie's TCP wire format, version 3 (docs/wire.md).
//
// A connection starts with a hello in each direction:
//   magic "CLHS" (u32), version (u16), flags (u16), rank (i32), world (i32),
//   nonce (16 random bytes)
// then a proof in each direction, connecting side first: HMAC-SHA256 of both
// hellos under the job token (auth.h); the token itself is never sent. It
// then carries frames: a fixed 112-byte little-endian header (everything a
// receiver needs to validate the frame before touching a buffer) followed by
// `bytes` of payload.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "backends/tcp/auth.h"
#include "core/frame.h"

namespace collie::tcp {

inline constexpr std::uint32_t kHandshakeMagic = 0x53484c43;  // "CLHS"
inline constexpr std::uint32_t kFrameMagic = 0x52464c43;      // "CLFR"
inline constexpr std::uint16_t kWireVersion = 3;
inline constexpr std::size_t kHandshakeBytes = 32;
inline constexpr std::size_t kHeaderBytes = 112;
// A header whose kind byte is this is the transport's own "goodbye": the
// sender's program ended and it is closing the connection on purpose. Its
// `bytes` field is the length of a UTF-8 reason that follows (empty: it
// finished; else how it ended, e.g. "after losing rank 3 (connection
// closed by the peer)"), at most kMaxGoodbyeBytes.
inline constexpr std::uint8_t kGoodbyeKind = 0xff;
inline constexpr std::uint64_t kMaxGoodbyeBytes = 4096;
// Frames larger than this are refused (a corrupt or hostile length).
inline constexpr std::uint64_t kMaxFrameBytes = 1ull << 34;

struct Handshake {
  std::uint16_t version = kWireVersion;
  std::uint16_t flags = 0;
  std::int32_t rank = -1;
  std::int32_t world = 0;
  Nonce nonce{};
};

std::array<std::uint8_t, kHandshakeBytes> encode(const Handshake& h);
// Empty, with `why` set, when the bytes are not a hello of this version.
std::optional<Handshake> decode_handshake(const std::uint8_t* bytes, std::string* why);

std::array<std::uint8_t, kHeaderBytes> encode(const FrameHeader& h);
// Empty, with `why` set, when the header is malformed (magic, version, kind,
// dtype, length).
std::optional<FrameHeader> decode_header(const std::uint8_t* bytes, std::string* why);
// The header's `bytes` field, whatever its kind (a goodbye's reason length).
std::uint64_t header_payload_bytes(const std::uint8_t* bytes);

}  // namespace collie::tcp
