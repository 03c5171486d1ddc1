// TcpTransport's handshake: listening and accepting, connecting to lower
// ranks, the versioned hellos and the proofs of the job token (auth.h) that
// admit a connection to the peer table -- or refuse it, with a log line,
// without disturbing the job. A connection that passes goes to the data path
// (connection_up); one that fails is lost.
#include "backends/tcp/tcp_transport.h"

#include <iostream>
#include <memory>
#include <string>

#include "backends/tcp/peer_connection.h"

namespace collie::tcp {

// A connection accepted and not yet authenticated. It has until its
// deadline to prove the job token (set_handshake_timeout), else it is closed:
// idle strangers cannot hold descriptors the real ranks need.
struct TcpTransport::Pending {
  explicit Pending(asio::io_context& io) : socket(io), deadline(io) {}
  asio::ip::tcp::socket socket;
  asio::steady_timer deadline;
  int rank = -1;
  std::array<std::uint8_t, kHandshakeBytes> hello_in{}, hello_out{};
  Mac proof_in{};
};

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
    if (!*alive || ec == asio::error::operation_aborted) return;  // closed
    if (ec) {
      // Out of descriptors, a connection reset before it was taken: keep
      // listening, after a pause so that an error that persists does not spin.
      std::cerr << "collie tcp: rank " << rank_ << ": accepting a connection failed (" << ec.message()
                << "); still listening\n";
      auto retry = std::make_shared<asio::steady_timer>(loop_.io(), kAcceptRetry);
      retry->async_wait([this, retry, alive](const asio::error_code& e) {
        if (*alive && !e && acceptor_) accept_next();
      });
      return;
    }
    // A connection that has not proven the job token in time is closed.
    c->deadline.expires_after(handshake_timeout_);
    c->deadline.async_wait([c](const asio::error_code& e) {
      if (e) return;  // cancelled: the handshake ended first
      asio::error_code ignored;
      c->socket.close(ignored);
    });
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
  c->deadline.cancel();
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
        c->deadline.cancel();  // authenticated
        p.claimed = true;
        p.socket = std::move(c->socket);
        p.socket.set_option(asio::ip::tcp::no_delay(true));
        p.proof_out = prove(token_, kAcceptProof, t);
        const int r = c->rank;
        asio::async_write(p.socket, asio::buffer(p.proof_out), [this, r, alive](const asio::error_code& e3, std::size_t) {
          if (!*alive) return;
          if (e3) return lose(r, "handshake failed: " + e3.message());
          connection_up(r);
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
            connection_up(peer);
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

}  // namespace collie::tcp
