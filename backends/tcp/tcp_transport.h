// The TCP backend: collie's core over real sockets (standalone Asio).
//
// A TcpTransport is one rank's Transport; its executor is a TcpEventLoop
// (tcp_event_loop.h), which one loop may share among the transports of many
// ranks.
//
// TcpTransport keeps one connection per peer (the higher rank connects to
// the lower one), both ends having exchanged a versioned handshake and
// proven the job token to each other (auth.h). A connection that fails the
// handshake -- no or a wrong token, another job, a rank already connected --
// is refused with a log line and does not disturb the job. Frames
// go out in post order per connection, straight from the caller's buffer;
// incoming frames are validated (docs/wire.md) before the core sees them:
// anything malformed or from the wrong peer closes that connection with a
// log line naming the peer, and the core fails every op waiting on it.
#pragma once

#include <poll.h>

#include <asio.hpp>
#include <chrono>
#include <coroutine>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/tcp/tcp_event_loop.h"
#include "backends/tcp/wire.h"
#include "core/transport.h"

namespace collie::tcp {

struct PeerConnection;

class TcpTransport final : public Transport, private TcpEventLoop::Source {
 public:
  // `token`: the job's secret (empty: none); every peer must hold the same.
  // Requires: `loop` outlives this transport.
  TcpTransport(TcpEventLoop& loop, int rank, int world, std::string token = {});
  ~TcpTransport() override;

  // Binds a listening socket; returns its port.
  std::uint16_t listen(const std::string& host, std::uint16_t port = 0);
  // Connects to a lower-ranked peer's listener (asynchronously).
  void connect(int peer, const std::string& host, std::uint16_t port);
  // Every peer's handshake has completed (a peer that has since left, as a
  // fast rank with nothing to do may, still counts).
  bool connected() const;
  // How long an accepted connection has to prove the job token before it is
  // closed (default 10 s), and the pause before listening again after
  // accept() failed (out of descriptors).
  void set_handshake_timeout(std::chrono::milliseconds t) { handshake_timeout_ = t; }
  static constexpr std::chrono::milliseconds kAcceptRetry{50};
  // Bytes held for payloads being received that do not land in a receive's
  // buffer (at most about twice what has arrived of them).
  std::size_t staged_payload_bytes() const;
  // The peers whose handshake has not completed, and why for those that failed.
  std::string unconnected() const;
  // Closes every connection at once (as a crash would).
  void close();
  // Dies as a crashed process would (fault injection in the in-process
  // world): closes every connection without a goodbye -- peers see the
  // connection end and lose this rank -- and from now on sends nothing,
  // completes nothing and resumes nothing of this rank.
  void crash();
  bool crashed() const { return crashed_; }
  // Tells every peer this rank is done, flushes what is queued (for at most
  // `timeout`), then closes: peers then fail only what still waits for it.
  // With `abandoned` (the program left ops in flight, now aborted), frames
  // not yet started are dropped -- their buffers may be gone -- and a frame
  // half written is cut off, which peers see as a lost connection.
  void shutdown(Nanos timeout = 2'000'000'000, bool abandoned = false);

  // Why this rank's program is ending badly ("with an error"), for its
  // goodbye; a peer lost earlier takes precedence.
  void note_failure(const std::string& reason);

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void attach(FrameSink* sink) override;
  void post_send(const FrameHeader& header, std::span<const std::byte> payload, void* cookie) override;
  void schedule(std::coroutine_handle<> h) override {
    if (!crashed_) loop_.ready(h);
  }
  void schedule_after_compute(std::uint64_t, std::coroutine_handle<> h) override {
    if (!crashed_) loop_.ready(h);
  }
  void schedule_at(Nanos when, std::coroutine_handle<> h) override {
    if (!crashed_) loop_.at(when, h);
  }
  bool run_until(const std::function<bool()>& done, std::optional<Nanos> deadline) override {
    return loop_.run_until(done, deadline);
  }
  Nanos now() const override { return loop_.now(); }

 private:
  // What this rank keeps of each peer: its connection, handshake, send
  // queue and receive state (peer_connection.h).
  using Peer = PeerConnection;

  // The handshake (tcp_handshake.cpp). A connection accepted and not yet
  // authenticated is Pending.
  struct Pending;
  void accept_next();
  void handshake_in(std::shared_ptr<Pending> c);
  void refuse(const std::shared_ptr<Pending>& c, const std::string& why);
  // The data path (tcp_data_path.cpp).
  // The connection to `peer` passed its handshake: frames may flow.
  void connection_up(int peer);
  // Reads what `peer`'s socket holds, without blocking, and hands every
  // complete frame to the sink; true if anything was read.
  bool pump(int peer);
  // Writes queued frames until done or the socket is full; true if any
  // byte went out.
  bool flush_writes(int peer);
  // Parses buffered bytes; false when the connection was lost meanwhile.
  bool parse(int peer);
  // Where the payload being received goes, with room for at least the
  // next `need` bytes (empty: discard it). A payload that does not land in
  // a receive's buffer is held in payload_in, which grows with the bytes
  // that arrive (at most doubling), never to what a header merely claims.
  std::span<std::byte> rx_destination(Peer& p, std::size_t need);
  void frame_received(int peer);
  void read_ended(int peer, const asio::error_code& ec);
  // TcpEventLoop::Source
  bool run_ready() override;
  bool poll_sockets() override;
  bool arm() override;
  bool settled() const override;
  void arm_write(int peer);
  // The transport's lifetime (tcp_transport.cpp).
  void lose(int peer, const std::string& why, bool clean = false);
  std::string peer_name(int peer) const;

  TcpEventLoop& loop_;
  const int rank_, world_;
  const std::string token_;
  FrameSink* sink_ = nullptr;
  // The first peer this rank lost without a goodbye, and why: the reason its
  // own goodbye gives, so peers further on learn the root cause.
  std::string first_loss_;
  bool crashed_ = false;
  std::unique_ptr<asio::ip::tcp::acceptor> acceptor_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; null for this rank
  std::vector<void*> sent_;                   // completed sends not yet reported to the sink
  std::vector<pollfd> pollfds_;               // poll_sockets' scratch: the sockets
  std::vector<int> pollpeers_;                // ... and their peers
  std::shared_ptr<bool> alive_;               // handlers check it after close()
  // What arrived before attach(): replayed from the event loop once attached.
  std::vector<std::function<void()>> early_;
  // Calls into the sink now, or later if none is attached yet.
  void to_sink(std::function<void()> f);
  std::chrono::milliseconds handshake_timeout_{10000};
};

}  // namespace collie::tcp
