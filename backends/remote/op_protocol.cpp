#include "backends/remote/op_protocol.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "backends/tcp/auth.h"

namespace collie::remote {

namespace {

void put_u32(std::vector<std::byte>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}

std::uint32_t get_u32(const std::byte* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

std::vector<std::byte> encode(const nlohmann::json& head, const std::vector<std::span<const std::byte>>& blobs) {
  nlohmann::json h = head;
  if (!blobs.empty()) {
    nlohmann::json sizes = nlohmann::json::array();
    for (const auto& b : blobs) sizes.push_back(b.size());
    h["blobs"] = std::move(sizes);
  }
  // Invalid UTF-8 in a text field must not end the job: replace it.
  const std::string text = h.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::size_t total = 4 + text.size();
  for (const auto& b : blobs) total += b.size();
  std::vector<std::byte> out;
  out.reserve(total);
  put_u32(out, static_cast<std::uint32_t>(text.size()));
  const auto* t = reinterpret_cast<const std::byte*>(text.data());
  out.insert(out.end(), t, t + text.size());
  for (const auto& b : blobs) out.insert(out.end(), b.begin(), b.end());
  return out;
}

void MessageReader::feed(const std::byte* data, std::size_t n) {
  if (at_ > 0 && at_ == buf_.size()) {
    buf_.clear();
    at_ = 0;
  } else if (at_ > (1u << 20) && at_ * 2 > buf_.size()) {
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(at_));
    at_ = 0;
  }
  buf_.insert(buf_.end(), data, data + n);
}

std::optional<Message> MessageReader::next() {
  const std::size_t avail = buf_.size() - at_;
  if (avail < 4) return std::nullopt;
  std::size_t hlen = get_u32(buf_.data() + at_);
  if (binary_ && (hlen & 0x80000000u) != 0) {
    hlen &= 0x7fffffffu;
    if (hlen < 8 || hlen > max_header_)
      throw std::runtime_error("a binary message header of " + std::to_string(hlen) + " bytes");
    if (avail < 4 + hlen) return std::nullopt;
    std::uint64_t payload = 0;
    std::memcpy(&payload, buf_.data() + at_ + 4, sizeof payload);  // little-endian hosts only
    if (payload > max_message_) throw std::runtime_error("a message of more than " + std::to_string(max_message_) + " bytes");
    if (avail - 4 - hlen < payload) return std::nullopt;
    const auto h = buf_.begin() + static_cast<std::ptrdiff_t>(at_ + 4);
    const auto p = h + static_cast<std::ptrdiff_t>(hlen);
    Message m{nullptr, {}};
    m.blobs.emplace_back(h, p);
    m.blobs.emplace_back(p, p + static_cast<std::ptrdiff_t>(payload));
    at_ += 4 + hlen + static_cast<std::size_t>(payload);
    return m;
  }
  if (hlen > max_header_)
    throw std::runtime_error("a message header of " + std::to_string(hlen) + " bytes (at most " +
                             std::to_string(max_header_) + " are allowed here)");
  if (avail < 4 + hlen) return std::nullopt;
  Message m;
  const char* h = reinterpret_cast<const char*>(buf_.data() + at_ + 4);
  m.head = nlohmann::json::parse(h, h + hlen, nullptr, false);
  if (m.head.is_discarded() || !m.head.is_object()) throw std::runtime_error("a message header that is not a JSON object");
  std::vector<std::size_t> sizes;
  std::size_t total = 0;
  if (m.head.contains("blobs")) {
    const auto& b = m.head["blobs"];
    if (!b.is_array()) throw std::runtime_error("a message whose 'blobs' is not a list of sizes");
    for (const auto& s : b) {
      if (!s.is_number_unsigned()) throw std::runtime_error("a message whose 'blobs' is not a list of sizes");
      const auto v = s.get<std::uint64_t>();
      if (v > max_message_ || total + v > max_message_)
        throw std::runtime_error("a message of more than " + std::to_string(max_message_) + " bytes");
      total += static_cast<std::size_t>(v);
      sizes.push_back(static_cast<std::size_t>(v));
    }
  }
  if (avail < 4 + hlen + total) return std::nullopt;
  std::size_t p = at_ + 4 + hlen;
  for (std::size_t s : sizes) {
    m.blobs.emplace_back(buf_.begin() + static_cast<std::ptrdiff_t>(p), buf_.begin() + static_cast<std::ptrdiff_t>(p + s));
    p += s;
  }
  at_ = p;
  return m;
}

Message read_message(int fd, MessageReader& reader) {
  std::byte buf[64 * 1024];
  for (;;) {
    if (auto m = reader.next()) return std::move(*m);
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) throw std::runtime_error("the controller closed the connection");
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("reading from the controller: ") + std::strerror(errno));
    }
    reader.feed(buf, static_cast<std::size_t>(n));
  }
}

void write_message(int fd, const nlohmann::json& head, const std::vector<std::span<const std::byte>>& blobs) {
  const std::vector<std::byte> bytes = encode(head, blobs);
  std::size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("writing to the controller: ") + std::strerror(errno));
    }
    off += static_cast<std::size_t>(n);
  }
}

std::string hello_mac(const std::string& token, const std::string& nonce_hex, int rank) {
  const std::string msg = nonce_hex + " " + std::to_string(rank);
  const tcp::Mac mac = tcp::prove(token, "collie op worker ",
                                  std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(msg.data()), msg.size()));
  return tcp::to_hex(mac);
}

int connect_to(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("COLLIE_CONTROLLER is '" + address + "', not HOST:PORT");
  const std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    throw std::runtime_error("cannot resolve the controller " + address + ": " + gai_strerror(rc));
  int fd = -1;
  std::string why = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    why = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd < 0) throw std::runtime_error("cannot connect to the controller at " + address + ": " + why);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace collie::remote
