// What a TcpTransport keeps of one peer: the connection's socket, how far
// its handshake got, the frames queued to send and the state of the frame
// being received. Internal to the TCP transport (tcp_transport.cpp,
// tcp_handshake.cpp); one thread, the event loop's, touches it.
#pragma once

#include <asio.hpp>
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/tcp/wire.h"

namespace collie::tcp {

// Why a peer is lost when its goodbye named nothing it had lost.
inline constexpr std::string_view kFinished = "its program finished";

struct PeerConnection {
  // A frame to send: its header, encoded, and its payload, read from the
  // caller's buffer as it is written; `cookie` goes to the sink once all of
  // it is out (none for a goodbye).
  struct Out {
    std::array<std::uint8_t, kHeaderBytes> header;
    std::span<const std::byte> payload;
    void* cookie;
  };
  explicit PeerConnection(asio::io_context& io) : socket(io) {}
  asio::ip::tcp::socket socket;
  bool claimed = false;  // a connection for this rank is past its proof (or ours is under way)
  bool up = false;       // handshake done, connection open
  bool was_up = false;   // handshake done at some point
  std::string lost_why;  // why it was lost, when it was
  bool lost = false;
  bool said_goodbye = false;
  std::string goodbye_reason;  // what it lost before it ended (empty: it finished)
  // Frames to send, the first one out_off bytes (header, then payload)
  // written; writes are non-blocking system calls made by this transport.
  bool writing() const { return out_off > 0; }  // mid-frame
  std::size_t out_off = 0;
  bool wr_blocked = false;   // the socket's send buffer is full
  bool wr_armed = false;     // an async_wait for writability is outstanding
  // A write failed (the peer closed or reset): the reader, which sees the
  // end of the stream after any goodbye the peer sent, reports the loss.
  bool write_failed = false;
  std::deque<Out> out;
  std::array<std::uint8_t, kHandshakeBytes> hs_in{}, hs_out{};
  Mac proof_in{}, proof_out{};
  // The receive side, also non-blocking system calls. Bytes read but not
  // yet parsed are rx[rx_head, rx_tail); one read takes whatever the
  // socket holds (several small frames at once). A large payload is read
  // straight into where it goes: the sink's landing zone (a receive's own
  // buffer) or payload_in.
  std::unique_ptr<std::byte[]> rx;  // kStagingBytes, allocated when the connection is up
  std::size_t rx_head = 0, rx_tail = 0;
  enum class Rx { kHeader, kPayload, kGoodbye } rx_state = Rx::kHeader;
  FrameHeader rx_frame;        // the frame whose payload is arriving
  std::uint64_t rx_got = 0;    // of its payload bytes
  bool rx_landing = false;     // its payload goes to the sink's landing zone
  bool rx_reduce = false;      // ... combined into it (always through staging)
  ReduceOp rx_zone_op = ReduceOp::kSum;
  bool rx_discard = false;     // the landing zone went away: drop the payload
  bool rx_armed = false;       // an async_wait for readability is outstanding
  std::vector<std::byte> payload_in;
};

}  // namespace collie::tcp
