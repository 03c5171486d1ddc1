// TcpTransport's data path, on connections the handshake let in: frames
// out (queued per peer in post order, written with non-blocking sendmsg(2)
// straight from the caller's buffer, completions reported from the loop),
// frames in (non-blocking reads through a staging buffer, or straight into
// a receive's landing zone; headers validated before the core sees them),
// the loop's Source calls that drive both, and the goodbye at shutdown.
#include "backends/tcp/tcp_transport.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "backends/tcp/peer_connection.h"
#include "core/error.h"

namespace collie::tcp {

std::size_t TcpTransport::staged_payload_bytes() const {
  std::size_t n = 0;
  for (const auto& p : peers_)
    if (p) n += p->payload_in.capacity();
  return n;
}

namespace {
// Up to this many peers, a spinning loop tries each socket's recv(2) instead
// of asking poll(2) first.
constexpr int kDirectSpinPeers = 2;
// Frames gathered into one sendmsg(2).
constexpr int kMaxFramesPerWrite = 16;
// Staging per connection: one read takes up to this many bytes.
constexpr std::size_t kStagingBytes = 64 * 1024;
// A payload with at least this much left, and nothing staged, is read
// straight into its destination (no staging copy).
constexpr std::uint64_t kDirectReadBytes = 16 * 1024;
// One pump reads at most this much before letting the loop run (a long
// receive must not hold up the sends and reductions it feeds).
constexpr std::size_t kPumpBudgetBytes = 1024 * 1024;
}  // namespace

void TcpTransport::post_send(const FrameHeader& h, std::span<const std::byte> payload, void* cookie) {
  Peer& p = *peers_[static_cast<std::size_t>(h.dst)];
  if (p.lost || crashed_) return;  // the core was told (or this rank is dead): nothing will complete
  p.out.push_back(Peer::Out{encode(h), payload, cookie});
  if (p.up && !p.wr_blocked) flush_writes(h.dst);
}

bool TcpTransport::flush_writes(int peer) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (!p.up || p.lost || p.write_failed || !*alive_) return false;
  const int fd = p.socket.native_handle();
  bool any = false;
  while (!p.out.empty()) {
    std::array<iovec, 2 * kMaxFramesPerWrite> iov;
    std::size_t k = 0;
    std::size_t skip = p.out_off;
    for (auto it = p.out.begin(); it != p.out.end() && k + 2 <= iov.size(); ++it) {
      if (skip < kHeaderBytes) iov[k++] = {it->header.data() + skip, kHeaderBytes - skip};
      skip = skip > kHeaderBytes ? skip - kHeaderBytes : 0;
      if (it->payload.size() > skip)
        iov[k++] = {const_cast<std::byte*>(it->payload.data()) + skip, it->payload.size() - skip};
      skip = 0;
    }
    msghdr m{};
    m.msg_iov = iov.data();
    m.msg_iovlen = k;
    const ssize_t n = ::sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        p.wr_blocked = true;
        return any;
      }
      // Read what the peer sent before it went (its goodbye names what it
      // lost); the reader reports the loss when it reaches the end.
      p.write_failed = true;
      p.out.clear();
      p.out_off = 0;
      return true;
    }
    any = true;
    // Retire the frames written in full.
    std::size_t done = p.out_off + static_cast<std::size_t>(n);
    p.out_off = 0;
    while (!p.out.empty()) {
      const std::size_t total = kHeaderBytes + p.out.front().payload.size();
      if (done < total) {
        p.out_off = done;
        break;
      }
      done -= total;
      if (void* cookie = p.out.front().cookie) sent_.push_back(cookie);
      p.out.pop_front();
    }
  }
  p.wr_blocked = false;
  return any;
}

bool TcpTransport::run_ready() {
  if (sent_.empty() || !sink_ || crashed_) return false;
  // Completions are reported from the loop, never from inside post_send().
  auto sent = std::move(sent_);
  sent_.clear();
  for (void* cookie : sent) sink_->on_send_complete(cookie);
  return true;
}

bool TcpTransport::poll_sockets() {
  if (!*alive_) return false;
  // With one or two peers, trying each socket costs no more system calls
  // than poll(2) and saves the second call when data is there (about 1 us
  // per exchange on loopback).
  int live = 0;
  for (int r = 0; r < world_ && live <= kDirectSpinPeers; ++r) {
    const auto& p = peers_[static_cast<std::size_t>(r)];
    live += p && p->up && !p->lost;
  }
  if (live <= kDirectSpinPeers) {
    bool any = false;
    for (int r = 0; r < world_ && *alive_; ++r) {
      const auto& p = peers_[static_cast<std::size_t>(r)];
      if (!p || !p->up || p->lost) continue;
      if (p->wr_blocked) any = flush_writes(r) || any;
      if (!p->lost) any = pump(r) || any;
    }
    return any;
  }
  pollfds_.clear();
  pollpeers_.clear();
  for (int r = 0; r < world_; ++r) {
    const auto& p = peers_[static_cast<std::size_t>(r)];
    if (!p || !p->up || p->lost) continue;
    pollfds_.push_back({p->socket.native_handle(), static_cast<short>(POLLIN | (p->wr_blocked ? POLLOUT : 0)), 0});
    pollpeers_.push_back(r);
  }
  if (pollfds_.empty() || ::poll(pollfds_.data(), pollfds_.size(), 0) <= 0) return false;
  bool any = false;
  for (std::size_t i = 0; i < pollfds_.size(); ++i) {
    const short ev = pollfds_[i].revents;
    if (!ev) continue;
    const int r = pollpeers_[i];
    if (ev & POLLOUT) any = flush_writes(r) || any;
    if (ev & (POLLIN | POLLHUP | POLLERR)) any = pump(r) || any;
  }
  return any;
}

bool TcpTransport::arm() {
  if (!*alive_) return false;
  // A socket with data waiting may have no edge left to wake epoll: look first.
  if (poll_sockets()) return true;
  auto alive = alive_;
  for (int r = 0; r < world_; ++r) {
    Peer* p = peers_[static_cast<std::size_t>(r)].get();
    if (!p || !p->up || p->lost) continue;
    if (!p->rx_armed) {
      p->rx_armed = true;
      p->socket.async_wait(asio::ip::tcp::socket::wait_read, [this, r, alive](const asio::error_code& ec) {
        if (!*alive) return;
        Peer& q = *peers_[static_cast<std::size_t>(r)];
        q.rx_armed = false;
        if (!ec && !q.lost) pump(r);
      });
    }
    if (p->wr_blocked) arm_write(r);
  }
  return false;
}

bool TcpTransport::settled() const {
  if (crashed_ || !*alive_) return true;  // its sockets are closed: their ends show up at the peers
  if (!sent_.empty() || !early_.empty()) return false;
  for (int r = 0; r < world_; ++r) {
    const Peer* p = peers_[static_cast<std::size_t>(r)].get();
    if (r == rank_ || (p && p->lost)) continue;
    if (!p || !p->up || !p->out.empty() || p->rx_head != p->rx_tail || p->rx_state != Peer::Rx::kHeader) return false;
    int unsent = 0, unread = 0;
    const int fd = const_cast<Peer*>(p)->socket.native_handle();
    if (::ioctl(fd, SIOCOUTQ, &unsent) != 0 || ::ioctl(fd, SIOCINQ, &unread) != 0 || unsent != 0 || unread != 0)
      return false;
  }
  return true;
}

void TcpTransport::arm_write(int peer) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (p.wr_armed) return;
  p.wr_armed = true;
  auto alive = alive_;
  p.socket.async_wait(asio::ip::tcp::socket::wait_write, [this, peer, alive](const asio::error_code& ec) {
    if (!*alive) return;
    Peer& q = *peers_[static_cast<std::size_t>(peer)];
    q.wr_armed = false;
    if (!ec && !q.lost) flush_writes(peer);
  });
}

void TcpTransport::connection_up(int peer) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  p.up = true;
  p.was_up = true;
  asio::error_code ec;
  p.socket.non_blocking(true, ec);
  p.rx = std::make_unique<std::byte[]>(kStagingBytes);
  pump(peer);
  flush_writes(peer);
}

std::span<std::byte> TcpTransport::rx_destination(Peer& p, std::size_t need) {
  if (p.rx_discard) return {};
  if (p.rx_state == Peer::Rx::kGoodbye)
    return {reinterpret_cast<std::byte*>(p.goodbye_reason.data()), p.goodbye_reason.size()};
  if (!p.rx_landing) {
    const std::uint64_t want = std::min<std::uint64_t>(p.rx_frame.bytes, std::max<std::uint64_t>(p.rx_got + need, 2 * p.payload_in.size()));
    if (p.payload_in.size() < want) p.payload_in.resize(static_cast<std::size_t>(want));
    return p.payload_in;
  }
  // Asked again before every write: the receive may have been aborted (and
  // its buffer freed) since the last one.
  const FrameSink::Landing zone = sink_ ? sink_->landing_zone(p.rx_frame) : FrameSink::Landing{};
  if (zone.dst.size() != p.rx_frame.bytes || zone.reduce != p.rx_reduce) {
    p.rx_discard = true;
    return {};
  }
  return zone.dst;
}

bool TcpTransport::pump(int peer) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  auto alive = alive_;
  bool any = false;
  std::size_t budget = kPumpBudgetBytes;
  while (*alive && !p.lost) {
    // Straight into the payload's destination when it is large and nothing
    // is staged, else into the staging buffer. A landing zone is asked for
    // again before every read (rx_destination): the receive may have been
    // aborted, and its buffer freed, since the last one.
    std::span<std::byte> into;
    bool direct = false;
    if (p.rx_state != Peer::Rx::kHeader && p.rx_head == p.rx_tail && !p.rx_reduce &&
        p.rx_frame.bytes - p.rx_got >= kDirectReadBytes) {
      std::span<std::byte> dst = rx_destination(p, kDirectReadBytes);
      if (!dst.empty()) {
        into = dst.subspan(p.rx_got);
        direct = true;
      }
    }
    if (!direct) {
      if (p.rx_head == p.rx_tail) p.rx_head = p.rx_tail = 0;
      if (kStagingBytes - p.rx_tail < kHeaderBytes) {
        std::memmove(p.rx.get(), p.rx.get() + p.rx_head, p.rx_tail - p.rx_head);
        p.rx_tail -= p.rx_head;
        p.rx_head = 0;
      }
      into = {p.rx.get() + p.rx_tail, kStagingBytes - p.rx_tail};
    }
    const ssize_t n = ::recv(p.socket.native_handle(), into.data(), into.size(), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return any;
      read_ended(peer, asio::error_code(errno, asio::system_category()));
      return true;
    }
    if (n == 0) {
      read_ended(peer, asio::error::eof);
      return true;
    }
    any = true;
    if (direct) p.rx_got += static_cast<std::size_t>(n);
    else p.rx_tail += static_cast<std::size_t>(n);
    if (!parse(peer)) return true;
    // A short read most likely drained the socket: stop without the system
    // call that would say so (poll() or the armed wait tells when more
    // comes). A long stream yields to the loop after the budget.
    if (static_cast<std::size_t>(n) < into.size() || static_cast<std::size_t>(n) >= budget) return true;
    budget -= static_cast<std::size_t>(n);
  }
  return any;
}

bool TcpTransport::parse(int peer) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  for (;;) {
    if (p.lost) return false;
    const std::size_t staged = p.rx_tail - p.rx_head;
    if (p.rx_state == Peer::Rx::kHeader) {
      if (staged < kHeaderBytes) return true;
      const auto* bytes = reinterpret_cast<const std::uint8_t*>(p.rx.get() + p.rx_head);
      p.rx_head += kHeaderBytes;
      std::string why;
      auto h = decode_header(bytes, &why);
      if (!h && why == "goodbye") {
        p.said_goodbye = true;
        const std::uint64_t n = header_payload_bytes(bytes);
        if (n == 0 || n > kMaxGoodbyeBytes) continue;
        p.goodbye_reason.assign(n, '\0');
        p.rx_frame = FrameHeader{};
        p.rx_frame.bytes = n;
        p.rx_got = 0;
        p.rx_discard = false;
        p.rx_landing = p.rx_reduce = false;
        p.rx_state = Peer::Rx::kGoodbye;
        continue;
      }
      if (h && (h->src != peer || h->dst != rank_))
        why = "frame claims to be from rank " + std::to_string(h->src) + " to rank " + std::to_string(h->dst);
      if (!h || !why.empty()) {
        std::cerr << "collie tcp: rank " << rank_ << " rejected a frame from " << peer_name(peer) << ": " << why << "\n";
        lose(peer, "sent a malformed frame (" + why + ")");
        return false;
      }
      p.rx_frame = *h;
      p.rx_got = 0;
      p.rx_discard = false;
      p.rx_landing = p.rx_reduce = false;
      if (h->bytes == 0) {
        frame_received(peer);
        continue;
      }
      p.rx_state = Peer::Rx::kPayload;
      const FrameSink::Landing zone = sink_ && h->kind == FrameKind::kData ? sink_->landing_zone(*h) : FrameSink::Landing{};
      p.rx_landing = zone.dst.size() == h->bytes;
      p.rx_reduce = p.rx_landing && zone.reduce;
      p.rx_zone_op = zone.op;
      if (!p.rx_landing) p.payload_in.clear();  // grown as the bytes arrive (rx_destination)
      continue;
    }
    // A payload (or a goodbye's reason): take what is staged.
    const std::uint64_t want = p.rx_frame.bytes - p.rx_got;
    std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(want, staged));
    // A reduction lands whole elements, each as soon as it is here (while
    // the staged bytes are still in cache); a split element waits.
    const std::size_t esize = p.rx_reduce ? dtype_size(p.rx_frame.dtype) : 1;
    take -= take % esize;
    if (take == 0 && want > 0) return true;
    if (p.rx_reduce && reinterpret_cast<std::uintptr_t>(p.rx.get() + p.rx_head) % esize != 0) {
      // Elements are read in place: align them (the staging buffer is).
      std::memmove(p.rx.get(), p.rx.get() + p.rx_head, staged);
      p.rx_tail = staged;
      p.rx_head = 0;
    }
    if (take > 0) {
      std::span<std::byte> dst = rx_destination(p, take);
      if (dst.empty()) {
      } else if (p.rx_reduce) {
        reduce(dst.data() + p.rx_got, p.rx.get() + p.rx_head, take / esize, p.rx_frame.dtype, p.rx_zone_op);
      } else {
        std::memcpy(dst.data() + p.rx_got, p.rx.get() + p.rx_head, take);
      }
      p.rx_head += take;
      p.rx_got += take;
    }
    if (p.rx_got < p.rx_frame.bytes) return true;
    const bool goodbye = p.rx_state == Peer::Rx::kGoodbye;
    p.rx_state = Peer::Rx::kHeader;
    if (!goodbye && !p.rx_discard) frame_received(peer);
  }
}

void TcpTransport::frame_received(int peer) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  const FrameHeader h = p.rx_frame;
  std::span<const std::byte> payload;
  if (h.bytes > 0) payload = p.rx_landing ? std::span<const std::byte>(rx_destination(p, 0)) : std::span<const std::byte>(p.payload_in);
  if (h.bytes > 0 && payload.empty()) return;  // its landing zone went away
  if (sink_) {
    sink_->on_frame(h, payload);
  } else {
    auto copy = std::make_shared<std::vector<std::byte>>(payload.begin(), payload.end());
    to_sink([this, h, copy] { sink_->on_frame(h, *copy); });
  }
}

void TcpTransport::read_ended(int peer, const asio::error_code& ec) {
  const Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (p.rx_state == Peer::Rx::kGoodbye) return lose(peer, "its program ended (its goodbye was cut off)", true);
  if (p.said_goodbye)
    return lose(peer, p.goodbye_reason.empty() ? std::string(kFinished) : "its program ended " + p.goodbye_reason, true);
  if (p.rx_state == Peer::Rx::kPayload) return lose(peer, "receive failed: " + ec.message());
  lose(peer, ec == asio::error::eof ? "connection closed by the peer" : "receive failed: " + ec.message());
}

void TcpTransport::shutdown(Nanos timeout, bool abandoned) {
  if (!*alive_) return;
  if (abandoned) {
    for (int p = 0; p < world_; ++p) {
      auto& peer = peers_[static_cast<std::size_t>(p)];
      if (!peer || peer->lost) continue;
      peer->out.clear();
      // Mid-frame from a buffer that may be freed: cut this connection off;
      // the other peers still get a goodbye naming what this rank lost.
      if (peer->writing()) lose(p, "cut off mid-frame at shutdown", true);
    }
  }
  FrameHeader bye;
  bye.src = rank_;
  const std::string reason = first_loss_.substr(0, kMaxGoodbyeBytes);
  bye.bytes = reason.size();
  for (int p = 0; p < world_; ++p) {
    auto& peer = peers_[static_cast<std::size_t>(p)];
    if (!peer || peer->lost || !peer->up) continue;
    bye.dst = p;
    Peer::Out o{encode(bye), std::as_bytes(std::span(reason)), nullptr};
    o.header[5] = kGoodbyeKind;
    peer->out.push_back(o);
    flush_writes(p);
  }
  auto flushed = [&] {
    for (const auto& peer : peers_)
      if (peer && !peer->lost && !peer->write_failed && !peer->out.empty()) return false;
    return true;
  };
  try {
    loop_.run_until(flushed, loop_.now() + timeout);
  } catch (const Error&) {
  }
  close();
}

}  // namespace collie::tcp
