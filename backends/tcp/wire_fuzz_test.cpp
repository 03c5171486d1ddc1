// Fuzzing the TCP wire decoders and the rendezvous's message forms (built
// with AddressSanitizer and UndefinedBehaviorSanitizer, see
// cmake/FuzzTests.cmake): random and mutated bytes must decode into
// something self-consistent or be refused with a reason -- never read out of
// bounds, overflow, or accept a length no frame can have.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "backends/tcp/rendezvous_wire.h"
#include "backends/tcp/wire.h"
#include "core/testing/random_header.h"

namespace collie::tcp {
namespace {

template <std::size_t N>
std::array<std::uint8_t, N> random_bytes() {
  std::array<std::uint8_t, N> b{};
  for (auto& x : b) x = *rc::gen::arbitrary<std::uint8_t>();
  return b;
}

// Flips, sets or copies a few bytes; the rest stays valid.
template <std::size_t N>
void mutate(std::array<std::uint8_t, N>& b) {
  for (int k = *rc::gen::inRange(1, 4); k > 0; --k) {
    const std::size_t at = *rc::gen::inRange<std::size_t>(0, N);
    switch (*rc::gen::inRange(0, 3)) {
      case 0: b[at] ^= static_cast<std::uint8_t>(1u << *rc::gen::inRange(0, 8)); break;
      case 1: b[at] = *rc::gen::element<std::uint8_t>(0, 1, 0x7f, 0x80, 0xff); break;
      default: b[at] = *rc::gen::arbitrary<std::uint8_t>(); break;
    }
  }
}

// Any header whose payload length matches its count, as a sender writes it.
FrameHeader gen_header() {
  FrameHeader h = testing::random_header();
  h.count = *rc::gen::inRange<std::uint64_t>(0, 1 << 20);
  h.bytes = h.count * dtype_size(h.dtype);
  return h;
}

// What every accepted header promises the receiver.
void check_accepted(const FrameHeader& h) {
  RC_ASSERT(h.bytes <= kMaxFrameBytes);
  RC_ASSERT(static_cast<int>(h.dtype) < kNumDTypes);
  RC_ASSERT(static_cast<int>(h.fp.dtype) < kNumDTypes);
  RC_ASSERT(static_cast<int>(h.fp.op) < kNumCollectiveKinds);
  RC_ASSERT(static_cast<int>(h.fp.reduce_op) < kNumReduceOps);
  if (h.kind == FrameKind::kEager || h.kind == FrameKind::kData) {
    // No wrap-around: the element count times the size is the byte count.
    RC_ASSERT(h.count <= kMaxFrameBytes);
    RC_ASSERT(h.count * dtype_size(h.dtype) == h.bytes);
  }
  // Decoding is stable: what was accepted encodes to bytes that decode the same.
  std::string why;
  const auto again = decode_header(encode(h).data(), &why);
  RC_ASSERT(again.has_value());
  RC_ASSERT(encode(*again) == encode(h));
}

RC_GTEST_PROP(WireFuzz, ValidHeadersRoundTrip, ()) {
  const FrameHeader h = gen_header();
  std::string why;
  const auto d = decode_header(encode(h).data(), &why);
  RC_ASSERT(d.has_value());
  RC_ASSERT(encode(*d) == encode(h));
}

RC_GTEST_PROP(WireFuzz, MutatedHeadersAreConsistentOrRefusedWithAReason, ()) {
  auto bytes = encode(gen_header());
  mutate(bytes);
  std::string why;
  const auto d = decode_header(bytes.data(), &why);
  if (!d) {
    RC_ASSERT(!why.empty());
    return;
  }
  check_accepted(*d);
  RC_ASSERT(header_payload_bytes(bytes.data()) == d->bytes);
}

RC_GTEST_PROP(WireFuzz, RandomHeadersAreConsistentOrRefused, ()) {
  auto bytes = random_bytes<kHeaderBytes>();
  if (*rc::gen::arbitrary<bool>()) {  // get past the magic and version often
    const auto valid = encode(FrameHeader{});
    std::memcpy(bytes.data(), valid.data(), 5);
  }
  std::string why;
  const auto d = decode_header(bytes.data(), &why);
  if (d) check_accepted(*d);
  else RC_ASSERT(!why.empty());
}

RC_GTEST_PROP(WireFuzz, HandshakesRoundTripOrAreRefused, ()) {
  Handshake h;
  h.flags = *rc::gen::arbitrary<std::uint16_t>();
  h.rank = *rc::gen::arbitrary<std::int32_t>();
  h.world = *rc::gen::arbitrary<std::int32_t>();
  auto bytes = encode(h);
  std::string why;
  auto d = decode_handshake(bytes.data(), &why);
  RC_ASSERT(d.has_value());
  RC_ASSERT(d->rank == h.rank && d->world == h.world && d->flags == h.flags);
  mutate(bytes);
  d = decode_handshake(bytes.data(), &why);
  if (!d) RC_ASSERT(!why.empty());
  else RC_ASSERT(d->version == kWireVersion);
}

// ---- the rendezvous's messages --------------------------------------------

using namespace rendezvous_wire;

std::vector<PeerAddress> gen_peers(int world) {
  std::vector<PeerAddress> peers;
  for (int r = 0; r < world; ++r) {
    PeerAddress p;
    p.port = *rc::gen::arbitrary<std::uint16_t>();
    p.host = *rc::gen::element<std::string>("127.0.0.1", "::1", "", "node-17.cluster.example",
                                            std::string(kMaxHostBytes, 'h'));
    peers.push_back(p);
  }
  return peers;
}

RC_GTEST_PROP(RendezvousWireFuzz, AddressTablesRoundTrip, ()) {
  const int world = *rc::gen::inRange(1, 40);
  const auto peers = gen_peers(world);
  const std::string body = encode_address_table(peers);
  RC_ASSERT(body.size() <= max_reply_body_bytes(world));
  const auto* p = reinterpret_cast<const std::uint8_t*>(body.data());
  const auto back = parse_address_table({p, body.size()}, world);
  RC_ASSERT(back.has_value());
  for (int r = 0; r < world; ++r) {
    RC_ASSERT((*back)[static_cast<std::size_t>(r)].host == peers[static_cast<std::size_t>(r)].host);
    RC_ASSERT((*back)[static_cast<std::size_t>(r)].port == peers[static_cast<std::size_t>(r)].port);
  }
}

RC_GTEST_PROP(RendezvousWireFuzz, MutatedAddressTablesParseWhollyOrNotAtAll, ()) {
  const int world = *rc::gen::inRange(1, 12);
  std::string body = encode_address_table(gen_peers(world));
  for (int k = *rc::gen::inRange(1, 4); k > 0; --k) {
    const std::size_t at = *rc::gen::inRange<std::size_t>(0, body.size() + 1);
    switch (*rc::gen::inRange(0, 3)) {
      case 0: if (at < body.size()) body[at] = static_cast<char>(*rc::gen::arbitrary<std::uint8_t>()); break;
      case 1: body.resize(at); break;
      default: body.insert(at, 1, static_cast<char>(*rc::gen::arbitrary<std::uint8_t>())); break;
    }
  }
  const auto* p = reinterpret_cast<const std::uint8_t*>(body.data());
  const auto parsed = parse_address_table({p, body.size()}, world);
  if (!parsed) return;
  // Accepted: exactly `world` entries that re-encode to the same bytes.
  RC_ASSERT(static_cast<int>(parsed->size()) == world);
  RC_ASSERT(encode_address_table(*parsed) == body);
}

RC_GTEST_PROP(RendezvousWireFuzz, RegistrationsDecodeAsSentOrAreStrangers, ()) {
  Registration r;
  r.version = *rc::gen::element(std::uint32_t{kVersion}, 1u, 0xffffffffu);
  r.rank = *rc::gen::arbitrary<int>();
  r.world = *rc::gen::arbitrary<int>();
  r.port = *rc::gen::arbitrary<std::uint16_t>();
  auto bytes = encode(r);
  const auto d = decode_registration(bytes);
  RC_ASSERT(d.has_value());
  RC_ASSERT(d->version == r.version && d->rank == r.rank && d->world == r.world && d->port == r.port);
  mutate(bytes);
  if (const auto m = decode_registration(bytes)) RC_ASSERT(encode(*m) == bytes);
}

RC_GTEST_PROP(RendezvousWireFuzz, RepliesVerifyOnlyUnchanged, ()) {
  const std::string token = *rc::gen::element<std::string>("", "job-a", std::string(100, 'k'));
  const RegisterBytes reg = encode(Registration{kVersion, 1, 2, 1234, {}});
  const std::string body = *rc::gen::element<std::string>("", "refused", encode_address_table(gen_peers(2)));
  auto reply = encode_reply(token, reg, true, body);
  auto check = [&](const std::vector<std::uint8_t>& b) {
    if (b.size() < kReplyHeadBytes + kMacBytes) return false;
    std::array<std::uint8_t, kReplyHeadBytes> head{};
    std::copy(b.begin(), b.begin() + kReplyHeadBytes, head.begin());
    const std::size_t n = reply_body_bytes(head);
    if (n != b.size() - kReplyHeadBytes - kMacBytes) return false;
    const std::span<const std::uint8_t> all(b);
    return verify_reply(token, reg, head, all.subspan(kReplyHeadBytes, n), all.subspan(kReplyHeadBytes + n));
  };
  RC_ASSERT(check(reply));
  const std::size_t at = *rc::gen::inRange<std::size_t>(0, reply.size());
  reply[at] ^= static_cast<std::uint8_t>(1u << *rc::gen::inRange(0, 8));
  RC_ASSERT(!check(reply));
}

}  // namespace
}  // namespace collie::tcp
