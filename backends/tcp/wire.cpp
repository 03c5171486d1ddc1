#include "backends/tcp/wire.h"

#include <cstring>

namespace collie::tcp {

namespace {

struct Writer {
  std::uint8_t* p;
  void u8(std::uint8_t v) { *p++ = v; }
  void u16(std::uint16_t v) {
    for (int i = 0; i < 2; ++i) *p++ = static_cast<std::uint8_t>(v >> (8 * i));
  }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) *p++ = static_cast<std::uint8_t>(v >> (8 * i));
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) *p++ = static_cast<std::uint8_t>(v >> (8 * i));
  }
  void i32(std::int32_t v) { u32(static_cast<std::uint32_t>(v)); }
};

struct Reader {
  const std::uint8_t* p;
  std::uint8_t u8() { return *p++; }
  std::uint16_t u16() {
    std::uint16_t v = 0;
    for (int i = 0; i < 2; ++i) v = static_cast<std::uint16_t>(v | (static_cast<std::uint16_t>(*p++) << (8 * i)));
    return v;
  }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(*p++) << (8 * i);
    return v;
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(*p++) << (8 * i);
    return v;
  }
  std::int32_t i32() { return static_cast<std::int32_t>(u32()); }
};

}  // namespace

std::array<std::uint8_t, kHandshakeBytes> encode(const Handshake& h) {
  std::array<std::uint8_t, kHandshakeBytes> out{};
  Writer w{out.data()};
  w.u32(kHandshakeMagic);
  w.u16(h.version);
  w.u16(h.flags);
  w.i32(h.rank);
  w.i32(h.world);
  for (std::uint8_t b : h.nonce) w.u8(b);
  return out;
}

std::optional<Handshake> decode_handshake(const std::uint8_t* bytes, std::string* why) {
  Reader r{bytes};
  if (r.u32() != kHandshakeMagic) {
    *why = "not a collie connection (bad handshake magic)";
    return std::nullopt;
  }
  Handshake h;
  h.version = r.u16();
  h.flags = r.u16();
  h.rank = r.i32();
  h.world = r.i32();
  for (auto& b : h.nonce) b = r.u8();
  if (h.version != kWireVersion) {
    *why = "wire version " + std::to_string(h.version) + ", this collie speaks " + std::to_string(kWireVersion);
    return std::nullopt;
  }
  return h;
}

std::array<std::uint8_t, kHeaderBytes> encode(const FrameHeader& h) {
  std::array<std::uint8_t, kHeaderBytes> out{};
  Writer w{out.data()};
  w.u32(kFrameMagic);
  w.u8(static_cast<std::uint8_t>(kWireVersion));
  w.u8(static_cast<std::uint8_t>(h.kind));
  w.u16(0);
  w.i32(h.src);
  w.i32(h.dst);
  w.u32(h.context);
  w.i32(h.tag);
  w.u64(h.group_digest);
  w.u64(h.channel_seq);
  w.u64(h.rendezvous_id);
  w.u8(static_cast<std::uint8_t>(h.dtype));
  w.u8(static_cast<std::uint8_t>(h.fp.op));
  w.u8(static_cast<std::uint8_t>(h.fp.reduce_op));
  w.u8(h.fp.algorithm);
  w.u8(static_cast<std::uint8_t>(h.fp.dtype));
  w.u8(0);
  w.u16(0);
  w.i32(h.fp.root);
  w.u32(0);
  w.u64(h.fp.seq);
  w.u64(h.fp.count);
  w.u64(h.count);
  w.u64(h.check.sum);
  w.u64(h.check.weighted);
  w.u64(h.bytes);
  return out;
}

std::uint64_t header_payload_bytes(const std::uint8_t* bytes) {
  Reader r{bytes + kHeaderBytes - 8};
  return r.u64();
}

std::optional<FrameHeader> decode_header(const std::uint8_t* bytes, std::string* why) {
  Reader r{bytes};
  if (r.u32() != kFrameMagic) {
    *why = "bad frame magic";
    return std::nullopt;
  }
  if (r.u8() != kWireVersion) {
    *why = "bad frame version";
    return std::nullopt;
  }
  FrameHeader h;
  const std::uint8_t kind = r.u8();
  if (kind == kGoodbyeKind) {
    *why = "goodbye";
    return std::nullopt;
  }
  if (kind > static_cast<std::uint8_t>(FrameKind::kData)) {
    *why = "unknown frame kind " + std::to_string(kind);
    return std::nullopt;
  }
  h.kind = static_cast<FrameKind>(kind);
  r.u16();
  h.src = r.i32();
  h.dst = r.i32();
  h.context = r.u32();
  h.tag = r.i32();
  h.group_digest = r.u64();
  h.channel_seq = r.u64();
  h.rendezvous_id = r.u64();
  const std::uint8_t dtype = r.u8(), op = r.u8(), rop = r.u8(), alg = r.u8(), fdt = r.u8();
  if (dtype >= kNumDTypes || fdt >= kNumDTypes || op >= kNumCollectiveKinds ||
      rop >= kNumReduceOps) {
    *why = "bad dtype, collective or reduce op code";
    return std::nullopt;
  }
  h.dtype = static_cast<DType>(dtype);
  h.fp.op = static_cast<CollectiveKind>(op);
  h.fp.reduce_op = static_cast<ReduceOp>(rop);
  h.fp.algorithm = alg;
  h.fp.dtype = static_cast<DType>(fdt);
  r.u8();
  r.u16();
  h.fp.root = r.i32();
  r.u32();
  h.fp.seq = r.u64();
  h.fp.count = r.u64();
  h.count = r.u64();
  h.check.sum = r.u64();
  h.check.weighted = r.u64();
  h.bytes = r.u64();
  if (h.bytes > kMaxFrameBytes) {
    *why = "frame of " + std::to_string(h.bytes) + " bytes is over the limit";
    return std::nullopt;
  }
  if (h.kind == FrameKind::kEager || h.kind == FrameKind::kData) {
    // count * size can wrap (float32 x 2^62 "is" 0 bytes): compare without multiplying past the limit.
    if (h.count > kMaxFrameBytes / dtype_size(h.dtype) || h.bytes != h.count * dtype_size(h.dtype)) {
      *why = "payload length " + std::to_string(h.bytes) + " does not match " + std::to_string(h.count) + " elements";
      return std::nullopt;
    }
  }
  return h;
}

}  // namespace collie::tcp
