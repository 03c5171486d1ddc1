#include "backends/tcp/tcp_transport.h"

#include <iostream>

#include "core/error.h"

namespace collie::tcp {

// ---- the event loop --------------------------------------------------------

TcpEventLoop::TcpEventLoop(int idle_deadlock_ms)
    : work_(asio::make_work_guard(io_)), start_(std::chrono::steady_clock::now()), idle_ms_(idle_deadlock_ms) {}

Nanos TcpEventLoop::now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
}

bool TcpEventLoop::run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) {
  if (running_)
    throw Error(ErrorKind::kUsage, OpContext{}, "a blocking wait() was called from inside a callback; use co_await");
  running_ = true;
  struct Reset {
    bool& b;
    ~Reset() { b = false; }
  } reset{running_};
  Nanos last = now();
  while (!done()) {
    const Nanos t = now();
    if (deadline && t >= *deadline) return false;
    bool progressed = false;
    while (!calls_.empty()) {
      auto f = std::move(calls_.front());
      calls_.pop_front();
      f();
      progressed = true;
    }
    if (!ready_.empty()) {
      auto h = ready_.front();
      ready_.pop_front();
      ++events_;
      h.resume();
      last = now();
      continue;
    }
    while (!timers_.empty() && timers_.begin()->first <= t) {
      ready_.push_back(timers_.begin()->second);
      timers_.erase(timers_.begin());
      progressed = true;
    }
    if (const std::size_t n = io_.poll()) {
      events_ += n;
      progressed = true;
    }
    if (progressed) {
      last = now();
      continue;
    }
    // Nothing to do: wait for I/O, at most until the next timer, the deadline or 10 ms.
    Nanos wait = 10'000'000;
    if (!timers_.empty()) wait = std::min(wait, timers_.begin()->first - t);
    if (deadline) wait = std::min(wait, *deadline - t);
    if (io_.run_one_for(std::chrono::nanoseconds(std::max<Nanos>(wait, 0)))) {
      ++events_;
      last = now();
      continue;
    }
    if (idle_ms_ > 0 && timers_.empty() && now() - last > static_cast<Nanos>(idle_ms_) * 1'000'000) {
      throw Error(ErrorKind::kDeadlock, OpContext{},
                  "no message, timer or coroutine has moved for " + std::to_string(idle_ms_) + " ms");
    }
  }
  return true;
}

// ---- the transport -----------------------------------------------------------

TcpTransport::TcpTransport(TcpEventLoop& loop, int rank, int world, std::uint64_t job)
    : loop_(loop), rank_(rank), world_(world), job_(job), alive_(std::make_shared<bool>(true)) {
  peers_.resize(static_cast<std::size_t>(world));
  for (int p = 0; p < world; ++p)
    if (p != rank) peers_[static_cast<std::size_t>(p)] = std::make_unique<Peer>(loop_.io());
}

TcpTransport::~TcpTransport() { close(); }

void TcpTransport::close() {
  if (!*alive_) return;
  *alive_ = false;
  asio::error_code ec;
  if (acceptor_) acceptor_->close(ec);
  for (auto& p : peers_)
    if (p) p->socket.close(ec);
}

void TcpTransport::attach(FrameSink* sink) {
  sink_ = sink;
  if (early_.empty()) return;
  auto early = std::move(early_);
  early_.clear();
  auto alive = alive_;
  loop_.call([early = std::move(early), alive] {
    if (!*alive) return;
    for (const auto& f : early) f();
  });
}

void TcpTransport::to_sink(std::function<void()> f) {
  if (sink_) f();
  else early_.push_back(std::move(f));
}

std::string TcpTransport::peer_name(int peer) const {
  std::string s = "rank " + std::to_string(peer);
  const auto& p = peers_[static_cast<std::size_t>(peer)];
  asio::error_code ec;
  if (p && p->socket.is_open()) {
    auto ep = p->socket.remote_endpoint(ec);
    if (!ec) s += " (" + ep.address().to_string() + ":" + std::to_string(ep.port()) + ")";
  }
  return s;
}

std::uint16_t TcpTransport::listen(const std::string& host, std::uint16_t port) {
  asio::ip::tcp::endpoint ep(asio::ip::make_address(host), port);
  acceptor_ = std::make_unique<asio::ip::tcp::acceptor>(loop_.io());
  acceptor_->open(ep.protocol());
  acceptor_->set_option(asio::ip::tcp::acceptor::reuse_address(true));
  acceptor_->bind(ep);
  acceptor_->listen();
  accept_next();
  return acceptor_->local_endpoint().port();
}

void TcpTransport::accept_next() {
  auto s = std::make_shared<asio::ip::tcp::socket>(loop_.io());
  auto alive = alive_;
  acceptor_->async_accept(*s, [this, s, alive](const asio::error_code& ec) {
    if (!*alive || ec) return;
    handshake_in(s);
    accept_next();
  });
}

void TcpTransport::handshake_in(std::shared_ptr<asio::ip::tcp::socket> s) {
  auto buf = std::make_shared<std::array<std::uint8_t, kHandshakeBytes>>();
  auto alive = alive_;
  asio::async_read(*s, asio::buffer(*buf), [this, s, buf, alive](const asio::error_code& ec, std::size_t) {
    if (!*alive || ec) return;
    std::string why;
    auto hs = decode_handshake(buf->data(), &why);
    if (hs) {
      if (hs->world != world_) why = "it believes the world has " + std::to_string(hs->world) + " ranks, not " + std::to_string(world_);
      else if (hs->job != job_) why = "it belongs to another job (different token)";
      else if (hs->rank <= rank_ || hs->rank >= world_) why = "it claims rank " + std::to_string(hs->rank) + ", which does not connect to rank " + std::to_string(rank_);
      else if (peers_[static_cast<std::size_t>(hs->rank)]->up || peers_[static_cast<std::size_t>(hs->rank)]->lost)
        why = "rank " + std::to_string(hs->rank) + " is already connected";
    }
    if (!why.empty()) {
      asio::error_code e2;
      auto ep = s->remote_endpoint(e2);
      std::cerr << "collie tcp: rank " << rank_ << " refused a connection from "
                << (e2 ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port())) << ": " << why
                << "\n";
      s->close(e2);
      return;
    }
    const int r = hs->rank;
    Peer& p = *peers_[static_cast<std::size_t>(r)];
    p.socket = std::move(*s);
    p.hs_out = encode(Handshake{kWireVersion, 0, rank_, world_, job_});
    asio::async_write(p.socket, asio::buffer(p.hs_out), [this, r, alive](const asio::error_code& e, std::size_t) {
      if (!*alive) return;
      if (e) return lose(r, "handshake failed: " + e.message());
      peers_[static_cast<std::size_t>(r)]->up = true;
      start_reading(r);
      write_next(r);
    });
  });
}

void TcpTransport::connect(int peer, const std::string& host, std::uint16_t port) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  asio::ip::tcp::endpoint ep(asio::ip::make_address(host), port);
  auto alive = alive_;
  p.socket.async_connect(ep, [this, peer, alive](const asio::error_code& ec) {
    if (!*alive) return;
    if (ec) return lose(peer, "cannot connect: " + ec.message());
    Peer& q = *peers_[static_cast<std::size_t>(peer)];
    q.socket.set_option(asio::ip::tcp::no_delay(true));
    q.hs_out = encode(Handshake{kWireVersion, 0, rank_, world_, job_});
    asio::async_write(q.socket, asio::buffer(q.hs_out), [this, peer, alive](const asio::error_code& e, std::size_t) {
      if (!*alive) return;
      if (e) return lose(peer, "handshake failed: " + e.message());
      Peer& z = *peers_[static_cast<std::size_t>(peer)];
      asio::async_read(z.socket, asio::buffer(z.hs_in), [this, peer, alive](const asio::error_code& e2, std::size_t) {
        if (!*alive) return;
        if (e2) return lose(peer, "handshake failed: " + e2.message());
        std::string why;
        auto hs = decode_handshake(peers_[static_cast<std::size_t>(peer)]->hs_in.data(), &why);
        if (hs && (hs->rank != peer || hs->world != world_ || hs->job != job_))
          why = "the process at rank " + std::to_string(peer) + "'s address answered as rank " + std::to_string(hs->rank);
        if (!why.empty()) return lose(peer, why);
        peers_[static_cast<std::size_t>(peer)]->up = true;
        start_reading(peer);
        write_next(peer);
      });
    });
  });
}

bool TcpTransport::connected() const {
  for (const auto& p : peers_)
    if (p && !p->up) return false;
  return true;
}

void TcpTransport::post_send(const FrameHeader& h, std::span<const std::byte> payload, void* cookie) {
  Peer& p = *peers_[static_cast<std::size_t>(h.dst)];
  if (p.lost) return;  // the core was told; nothing will complete
  p.out.push_back(Out{encode(h), payload, cookie});
  if (p.up && !p.writing) write_next(h.dst);
}

void TcpTransport::write_next(int peer) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (p.writing || p.out.empty() || p.lost || !p.up) return;
  p.writing = true;
  const Out& o = p.out.front();
  std::array<asio::const_buffer, 2> bufs = {asio::buffer(o.header), asio::buffer(o.payload.data(), o.payload.size())};
  auto alive = alive_;
  asio::async_write(p.socket, bufs, [this, peer, alive](const asio::error_code& ec, std::size_t) {
    if (!*alive) return;
    Peer& q = *peers_[static_cast<std::size_t>(peer)];
    q.writing = false;
    if (ec) return lose(peer, "send failed: " + ec.message());
    void* cookie = q.out.front().cookie;
    q.out.pop_front();
    if (cookie && sink_) sink_->on_send_complete(cookie);
    write_next(peer);
  });
}

void TcpTransport::start_reading(int peer) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  auto alive = alive_;
  asio::async_read(p.socket, asio::buffer(p.header_in), [this, peer, alive](const asio::error_code& ec, std::size_t) {
    if (!*alive) return;
    if (ec) {
      if (peers_[static_cast<std::size_t>(peer)]->said_goodbye) return lose(peer, "its program finished", true);
      return lose(peer, ec == asio::error::eof ? "connection closed by the peer" : "receive failed: " + ec.message());
    }
    std::string why;
    auto h = decode_header(peers_[static_cast<std::size_t>(peer)]->header_in.data(), &why);
    if (!h && why == "goodbye") {
      peers_[static_cast<std::size_t>(peer)]->said_goodbye = true;
      start_reading(peer);
      return;
    }
    if (h && (h->src != peer || h->dst != rank_))
      why = "frame claims to be from rank " + std::to_string(h->src) + " to rank " + std::to_string(h->dst);
    if (!h || !why.empty()) {
      std::cerr << "collie tcp: rank " << rank_ << " rejected a frame from " << peer_name(peer) << ": " << why << "\n";
      return lose(peer, "sent a malformed frame (" + why + ")");
    }
    if (h->bytes == 0) {
      const FrameHeader hd = *h;
      to_sink([this, hd] { sink_->on_frame(hd, {}); });
      start_reading(peer);
    } else {
      read_payload(peer, *h);
    }
  });
}

void TcpTransport::read_payload(int peer, FrameHeader h) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  p.payload_in.resize(h.bytes);
  auto alive = alive_;
  asio::async_read(p.socket, asio::buffer(p.payload_in.data(), p.payload_in.size()),
                   [this, peer, h, alive](const asio::error_code& ec, std::size_t) {
                     if (!*alive) return;
                     if (ec) return lose(peer, "receive failed: " + ec.message());
                     if (sink_) {
                       sink_->on_frame(h, peers_[static_cast<std::size_t>(peer)]->payload_in);
                     } else {
                       auto copy = std::make_shared<std::vector<std::byte>>(peers_[static_cast<std::size_t>(peer)]->payload_in);
                       to_sink([this, h, copy] { sink_->on_frame(h, *copy); });
                     }
                     start_reading(peer);
                   });
}

void TcpTransport::lose(int peer, const std::string& why, bool clean) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (p.lost) return;
  p.lost = true;
  p.up = false;
  asio::error_code ec;
  p.socket.close(ec);
  p.out.clear();
  to_sink([this, peer, why, clean] { sink_->on_peer_lost(peer, why, clean); });
}

void TcpTransport::shutdown(Nanos timeout) {
  if (!*alive_) return;
  FrameHeader bye;
  bye.src = rank_;
  for (int p = 0; p < world_; ++p) {
    auto& peer = peers_[static_cast<std::size_t>(p)];
    if (!peer || peer->lost || !peer->up) continue;
    bye.dst = p;
    Out o{encode(bye), {}, nullptr};
    o.header[5] = kGoodbyeKind;
    peer->out.push_back(o);
    write_next(p);
  }
  auto flushed = [&] {
    for (const auto& peer : peers_)
      if (peer && !peer->lost && (peer->writing || !peer->out.empty())) return false;
    return true;
  };
  try {
    loop_.run_until(flushed, loop_.now() + timeout);
  } catch (const Error&) {
  }
  close();
}

}  // namespace collie::tcp
