#include "backends/tcp/rendezvous_wire.h"

#include <algorithm>
#include <stdexcept>

namespace collie::tcp::rendezvous_wire {

namespace {

void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t get32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

Challenge encode_challenge(const Nonce& nonce) {
  Challenge c{};
  put32(c.data(), kChallengeMagic);
  put32(c.data() + 4, kVersion);
  std::copy(nonce.begin(), nonce.end(), c.begin() + 8);
  return c;
}

bool is_challenge(const Challenge& bytes) { return get32(bytes.data()) == kChallengeMagic; }

RegisterBytes encode(const Registration& r) {
  RegisterBytes b{};
  put32(b.data(), kRegisterMagic);
  put32(b.data() + 4, r.version);
  put32(b.data() + 8, static_cast<std::uint32_t>(r.rank));
  put32(b.data() + 12, static_cast<std::uint32_t>(r.world));
  put32(b.data() + 16, r.port);
  std::copy(r.nonce.begin(), r.nonce.end(), b.begin() + 20);
  return b;
}

std::optional<Registration> decode_registration(const RegisterBytes& b) {
  if (get32(b.data()) != kRegisterMagic) return std::nullopt;
  Registration r;
  r.version = get32(b.data() + 4);
  r.rank = static_cast<int>(get32(b.data() + 8));
  r.world = static_cast<int>(get32(b.data() + 12));
  r.port = get32(b.data() + 16);
  std::copy(b.begin() + 20, b.end(), r.nonce.begin());
  return r;
}

std::uint64_t max_reply_body_bytes(int world) {
  return static_cast<std::uint64_t>(std::max(world, 0)) * (3 + kMaxHostBytes) + 4096;
}

std::vector<std::uint8_t> encode_reply(const std::string& token, const RegisterBytes& reg, bool ok,
                                       const std::string& body) {
  std::vector<std::uint8_t> b(kReplyHeadBytes + body.size());
  b[0] = ok ? 0 : 1;
  put32(b.data() + 1, static_cast<std::uint32_t>(body.size()));
  std::copy(body.begin(), body.end(), b.begin() + kReplyHeadBytes);
  std::vector<std::uint8_t> t(reg.begin(), reg.end());
  t.insert(t.end(), b.begin(), b.end());
  const Mac mac = prove(token, kTableProof, t);
  b.insert(b.end(), mac.begin(), mac.end());
  return b;
}

std::uint32_t reply_body_bytes(const std::array<std::uint8_t, kReplyHeadBytes>& head) { return get32(head.data() + 1); }

bool verify_reply(const std::string& token, const RegisterBytes& reg,
                  const std::array<std::uint8_t, kReplyHeadBytes>& head, std::span<const std::uint8_t> body,
                  std::span<const std::uint8_t> mac) {
  std::vector<std::uint8_t> t(reg.begin(), reg.end());
  t.insert(t.end(), head.begin(), head.end());
  t.insert(t.end(), body.begin(), body.end());
  return verify(token, kTableProof, t, mac);
}

std::string encode_address_table(const std::vector<PeerAddress>& peers) {
  std::string body;
  for (const PeerAddress& pa : peers) {
    if (pa.host.size() > kMaxHostBytes)
      throw std::invalid_argument("host '" + pa.host.substr(0, 60) + "...' is longer than " +
                                  std::to_string(kMaxHostBytes) + " bytes");
    body.push_back(static_cast<char>(pa.port & 0xff));
    body.push_back(static_cast<char>(pa.port >> 8));
    body.push_back(static_cast<char>(pa.host.size()));
    body += pa.host;
  }
  return body;
}

std::optional<std::vector<PeerAddress>> parse_address_table(std::span<const std::uint8_t> body, int world) {
  std::vector<PeerAddress> peers;
  std::size_t i = 0;
  while (i + 3 <= body.size() && static_cast<int>(peers.size()) < world) {
    PeerAddress pa;
    pa.port = static_cast<std::uint16_t>(body[i] | (body[i + 1] << 8));
    const std::size_t n = body[i + 2];
    if (i + 3 + n > body.size()) return std::nullopt;
    pa.host.assign(body.begin() + static_cast<long>(i + 3), body.begin() + static_cast<long>(i + 3 + n));
    i += 3 + n;
    peers.push_back(std::move(pa));
  }
  if (static_cast<int>(peers.size()) != world || i != body.size()) return std::nullopt;
  return peers;
}

}  // namespace collie::tcp::rendezvous_wire
