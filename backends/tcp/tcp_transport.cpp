#include "backends/tcp/tcp_transport.h"

#include <iostream>

#include "core/error.h"

namespace collie::tcp {

// ---- the event loop --------------------------------------------------------

TcpEventLoop::TcpEventLoop(int idle_deadlock_ms, Nanos spin_ns)
    : work_(asio::make_work_guard(io_)),
      start_(std::chrono::steady_clock::now()),
      idle_ms_(idle_deadlock_ms),
      spin_ns_(spin_ns) {}

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
    // Nothing to do. A reply is often microseconds away: poll for a while
    // before sleeping in the kernel (a sleep and wake-up costs more than a
    // small message's whole round trip).
    if (spin_ns_ > 0 && t - last < spin_ns_) continue;
    // Then wait for I/O, at most until the next timer, the deadline or 10 ms.
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

namespace {
constexpr std::string_view kFinished = "its program finished";
}  // namespace

void TcpTransport::note_failure(const std::string& reason) {
  if (first_loss_.empty()) first_loss_ = reason;
}

TcpTransport::TcpTransport(TcpEventLoop& loop, int rank, int world, std::string token)
    : loop_(loop), rank_(rank), world_(world), token_(std::move(token)), alive_(std::make_shared<bool>(true)) {
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
  auto c = std::make_shared<Pending>(loop_.io());
  auto alive = alive_;
  acceptor_->async_accept(c->socket, [this, c, alive](const asio::error_code& ec) {
    if (!*alive || ec) return;
    handshake_in(c);
    accept_next();
  });
}

namespace {

constexpr std::string_view kConnectProof = "collie v2 proof from the connecting rank";
constexpr std::string_view kAcceptProof = "collie v2 proof from the accepting rank";

// Both hellos, the connecting side's first: what each proof covers.
std::array<std::uint8_t, 2 * kHandshakeBytes> transcript(const std::array<std::uint8_t, kHandshakeBytes>& connecting,
                                                         const std::array<std::uint8_t, kHandshakeBytes>& accepting) {
  std::array<std::uint8_t, 2 * kHandshakeBytes> t{};
  std::copy(connecting.begin(), connecting.end(), t.begin());
  std::copy(accepting.begin(), accepting.end(), t.begin() + kHandshakeBytes);
  return t;
}

}  // namespace

void TcpTransport::refuse(const std::shared_ptr<Pending>& c, const std::string& why) {
  asio::error_code ec;
  auto ep = c->socket.remote_endpoint(ec);
  std::cerr << "collie tcp: rank " << rank_ << " refused a connection from "
            << (ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port())) << ": " << why << "\n";
  c->socket.close(ec);
}

void TcpTransport::handshake_in(std::shared_ptr<Pending> c) {
  auto alive = alive_;
  asio::async_read(c->socket, asio::buffer(c->hello_in), [this, c, alive](const asio::error_code& ec, std::size_t) {
    if (!*alive || ec) return;
    std::string why;
    auto hs = decode_handshake(c->hello_in.data(), &why);
    if (hs) {
      if (hs->world != world_) why = "it believes the world has " + std::to_string(hs->world) + " ranks, not " + std::to_string(world_);
      else if (hs->rank <= rank_ || hs->rank >= world_) why = "it claims rank " + std::to_string(hs->rank) + ", which does not connect to rank " + std::to_string(rank_);
      else if (peers_[static_cast<std::size_t>(hs->rank)]->claimed)
        why = "it claims rank " + std::to_string(hs->rank) + ", which is already connected";
    }
    if (!why.empty()) return refuse(c, why);
    c->rank = hs->rank;
    c->hello_out = encode(Handshake{kWireVersion, 0, rank_, world_, fresh_nonce()});
    asio::async_write(c->socket, asio::buffer(c->hello_out), [this, c, alive](const asio::error_code& e, std::size_t) {
      if (!*alive || e) return;
      asio::async_read(c->socket, asio::buffer(c->proof_in), [this, c, alive](const asio::error_code& e2, std::size_t) {
        if (!*alive || e2) return;
        const auto t = transcript(c->hello_in, c->hello_out);
        if (!verify(token_, kConnectProof, t, c->proof_in))
          return refuse(c, "it claims rank " + std::to_string(c->rank) +
                               " but did not prove the job token (a wrong or missing COLLIE_JOB_TOKEN, or another job)");
        Peer& p = *peers_[static_cast<std::size_t>(c->rank)];
        if (p.claimed) return refuse(c, "it claims rank " + std::to_string(c->rank) + ", which is already connected");
        p.claimed = true;
        p.socket = std::move(c->socket);
        p.socket.set_option(asio::ip::tcp::no_delay(true));
        p.proof_out = prove(token_, kAcceptProof, t);
        const int r = c->rank;
        asio::async_write(p.socket, asio::buffer(p.proof_out), [this, r, alive](const asio::error_code& e3, std::size_t) {
          if (!*alive) return;
          if (e3) return lose(r, "handshake failed: " + e3.message());
          peers_[static_cast<std::size_t>(r)]->up = true;
          peers_[static_cast<std::size_t>(r)]->was_up = true;
          start_reading(r);
          write_next(r);
        });
      });
    });
  });
}

void TcpTransport::connect(int peer, const std::string& host, std::uint16_t port) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  p.claimed = true;
  asio::ip::tcp::endpoint ep(asio::ip::make_address(host), port);
  auto alive = alive_;
  auto step_failed = [this, peer](const asio::error_code& e) {
    lose(peer, "handshake failed: " + e.message() +
                   (e == asio::error::eof ? " (the peer refused us: a wrong or missing job token, or another job?)" : ""));
  };
  p.socket.async_connect(ep, [this, peer, alive, step_failed](const asio::error_code& ec) {
    if (!*alive) return;
    if (ec) return lose(peer, "cannot connect: " + ec.message());
    Peer& q = *peers_[static_cast<std::size_t>(peer)];
    q.socket.set_option(asio::ip::tcp::no_delay(true));
    q.hs_out = encode(Handshake{kWireVersion, 0, rank_, world_, fresh_nonce()});
    asio::async_write(q.socket, asio::buffer(q.hs_out), [this, peer, alive, step_failed](const asio::error_code& e, std::size_t) {
      if (!*alive) return;
      if (e) return step_failed(e);
      Peer& z = *peers_[static_cast<std::size_t>(peer)];
      asio::async_read(z.socket, asio::buffer(z.hs_in), [this, peer, alive, step_failed](const asio::error_code& e2, std::size_t) {
        if (!*alive) return;
        if (e2) return step_failed(e2);
        Peer& y = *peers_[static_cast<std::size_t>(peer)];
        std::string why;
        auto hs = decode_handshake(y.hs_in.data(), &why);
        if (hs && (hs->rank != peer || hs->world != world_))
          why = "the process at rank " + std::to_string(peer) + "'s address answered as rank " + std::to_string(hs->rank) +
                " of " + std::to_string(hs->world);
        if (!why.empty()) return lose(peer, why);
        y.proof_out = prove(token_, kConnectProof, transcript(y.hs_out, y.hs_in));
        asio::async_write(y.socket, asio::buffer(y.proof_out), [this, peer, alive, step_failed](const asio::error_code& e3, std::size_t) {
          if (!*alive) return;
          if (e3) return step_failed(e3);
          Peer& x = *peers_[static_cast<std::size_t>(peer)];
          asio::async_read(x.socket, asio::buffer(x.proof_in), [this, peer, alive, step_failed](const asio::error_code& e4, std::size_t) {
            if (!*alive) return;
            if (e4) return step_failed(e4);
            Peer& w = *peers_[static_cast<std::size_t>(peer)];
            if (!verify(token_, kAcceptProof, transcript(w.hs_out, w.hs_in), w.proof_in))
              return lose(peer, "the process at rank " + std::to_string(peer) + "'s address did not prove the job token");
            w.up = true;
            w.was_up = true;
            start_reading(peer);
            write_next(peer);
          });
        });
      });
    });
  });
}

bool TcpTransport::connected() const {
  for (const auto& p : peers_)
    if (p && !p->was_up) return false;
  return true;
}

std::string TcpTransport::unconnected() const {
  std::string s;
  for (int r = 0; r < world_; ++r) {
    const auto& p = peers_[static_cast<std::size_t>(r)];
    if (!p || p->was_up) continue;
    s += (s.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + (p->lost ? " (" + p->lost_why + ")" : " (no connection)");
  }
  return s;
}

void TcpTransport::post_send(const FrameHeader& h, std::span<const std::byte> payload, void* cookie) {
  Peer& p = *peers_[static_cast<std::size_t>(h.dst)];
  if (p.lost) return;  // the core was told; nothing will complete
  p.out.push_back(Out{encode(h), payload, cookie});
  if (p.up && !p.writing) write_next(h.dst);
}

void TcpTransport::write_next(int peer) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (p.writing || p.out.empty() || p.lost || !p.up || p.write_failed) return;
  p.writing = true;
  const Out& o = p.out.front();
  std::array<asio::const_buffer, 2> bufs = {asio::buffer(o.header), asio::buffer(o.payload.data(), o.payload.size())};
  auto alive = alive_;
  asio::async_write(p.socket, bufs, [this, peer, alive](const asio::error_code& ec, std::size_t) {
    if (!*alive) return;
    Peer& q = *peers_[static_cast<std::size_t>(peer)];
    q.writing = false;
    if (ec) {
      // Read what the peer sent before it went (its goodbye names what it
      // lost); the reader reports the loss when it reaches the end.
      q.write_failed = true;
      q.out.clear();
      return;
    }
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
      const Peer& q = *peers_[static_cast<std::size_t>(peer)];
      if (q.said_goodbye)
        return lose(peer, q.goodbye_reason.empty() ? std::string(kFinished) : "its program ended " + q.goodbye_reason, true);
      return lose(peer, ec == asio::error::eof ? "connection closed by the peer" : "receive failed: " + ec.message());
    }
    std::string why;
    auto h = decode_header(peers_[static_cast<std::size_t>(peer)]->header_in.data(), &why);
    if (!h && why == "goodbye") {
      Peer& q = *peers_[static_cast<std::size_t>(peer)];
      q.said_goodbye = true;
      const std::uint64_t n = header_payload_bytes(q.header_in.data());
      if (n == 0 || n > kMaxGoodbyeBytes) return start_reading(peer);
      q.goodbye_reason.resize(n);
      asio::async_read(q.socket, asio::buffer(q.goodbye_reason), [this, peer, alive](const asio::error_code& e, std::size_t) {
        if (!*alive) return;
        if (e) return lose(peer, "its program ended (its goodbye was cut off)", true);
        start_reading(peer);
      });
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
  p.lost_why = why;
  if (first_loss_.empty() && (!clean || why != kFinished)) first_loss_ = "after losing rank " + std::to_string(peer) + " (" + why + ")";
  asio::error_code ec;
  p.socket.close(ec);
  p.out.clear();
  to_sink([this, peer, why, clean] { sink_->on_peer_lost(peer, why, clean); });
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
      if (peer->writing) lose(p, "cut off mid-frame at shutdown", true);
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
    Out o{encode(bye), std::as_bytes(std::span(reason)), nullptr};
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
