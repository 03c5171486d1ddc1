// TcpTransport's lifetime: the peer table it is built with, the sink it
// reports to (what arrives before attach() is held for it), losing a peer,
// closing and crashing. The handshake is in tcp_handshake.cpp, the data path
// in tcp_data_path.cpp, the executor in tcp_event_loop.cpp.
#include "backends/tcp/tcp_transport.h"

#include <memory>
#include <string>

#include "backends/tcp/peer_connection.h"

namespace collie::tcp {

void TcpTransport::note_failure(const std::string& reason) {
  if (first_loss_.empty()) first_loss_ = reason;
}

TcpTransport::TcpTransport(TcpEventLoop& loop, int rank, int world, std::string token)
    : loop_(loop), rank_(rank), world_(world), token_(std::move(token)), alive_(std::make_shared<bool>(true)) {
  loop_.add_source(this);
  peers_.resize(static_cast<std::size_t>(world));
  for (int p = 0; p < world; ++p)
    if (p != rank) peers_[static_cast<std::size_t>(p)] = std::make_unique<Peer>(loop_.io());
}

TcpTransport::~TcpTransport() {
  loop_.remove_source(this);
  close();
}

void TcpTransport::close() {
  if (!*alive_) return;
  *alive_ = false;
  asio::error_code ec;
  if (acceptor_) acceptor_->close(ec);
  for (auto& p : peers_)
    if (p) p->socket.close(ec);
}

void TcpTransport::crash() {
  crashed_ = true;
  sent_.clear();
  close();
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
  p.out_off = 0;
  to_sink([this, peer, why, clean] { sink_->on_peer_lost(peer, why, clean); });
}

}  // namespace collie::tcp
