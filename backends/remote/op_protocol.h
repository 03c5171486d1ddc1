// The op protocol: how the controller -- the collie process that runs every
// rank's program, records it and checks it -- has a rank process of a
// process job (a worker) execute ops with the library under test. Workers:
// collie's own (`collie worker`: collie's core over TCP), the MPI worker
// (backends/mpi), the torch.distributed driver (backends/torch/
// collie_torch_worker.py, which implements this protocol in Python).
//
// Framing: [u32 little-endian N][N bytes of a JSON object][blobs], where
// the object's "blobs" (optional) lists the byte length of each binary
// attachment that follows, in order.
//
// Handshake. The worker connects to COLLIE_CONTROLLER (host:port); the
// controller sends {"t":"challenge","nonce":HEX}; the worker answers
//   {"t":"hello","rank":R,"world":W,"pid":P,"host":H,"library":TEXT,"mac":HEX}
// with mac = hex(HMAC-SHA256(COLLIE_JOB_TOKEN, "collie op worker " + nonce +
// " " + R)). The controller reads at most kMaxUnauthenticatedBytes before
// the mac checks, and refuses a rank it already has or one out of range.
// Rank 0's hello may carry "bootstrap":TEXT (a secret the library's ranks
// must share before they can talk: NCCL's unique id); then, once every rank
// has joined, the controller first sends each rank
//   {"t":"welcome","bootstrap":TEXT}
//
// Controller -> worker (a worker executes them in order):
//   {"t":"begin","timeout_ns":T,"views":"strided"}   a run starts: the last run's groups and
//                   handles are dropped; group 0 is a group of every rank
//                   (the run's world), so no message of one run can meet
//                   another's: a new one, or -- a worker's choice -- the last
//                   run's with the same T (a run follows only a run that
//                   left every op of every rank completed, nothing of it in
//                   flight). T: every op's timeout (absent: none).
//                   "world":W (absent: the job's): the run's ranks are 0..W-1
//                   -- group 0 is theirs -- and the others idle through it,
//                   told of every group, as non-members, so that every rank
//                   numbers groups alike (only for workers whose jobs serve
//                   smaller worlds: ProcessJobSpec::serves_smaller_worlds).
//                   views "strided" or "pitched" (JobOptions::views): hand
//                   the library non-contiguous views of the tensors, or
//                   fail each op as unsupported.
//   {"t":"group","group":G,"ranks":[...],"name":N,"timeout_ns":T}
//                   new_group; every rank gets it.
//   {"t":"ungroup","group":G}   destroy_group of group G; every rank gets it,
//                   after its ops on G completed (torch's
//                   destroy_process_group(group)). G is never used again.
//   {"t":"op","id":N,"group":G, ...the call...} + one blob per buffer: one
//     call of an op of core/op.h's table, its fields and buffer order as
//     call_codec.h says (the op's name, its arguments, the "layout" of its
//     buffers, the "tensors" they are, and the buffers this rank "writes").
//     A blocking op (async false) is answered when it completes; an async
//     one when it is waited for. algorithm (one of collie's) is for
//     collie's core; libraries ignore it. Times are in nanoseconds.
//   {"t":"wait","id":N}   wait for async op N.
//   {"t":"sync","id":N}   answer {"t":"synced","id":N} (everything before is
//                   done: a process fault may hit now).
//   {"t":"bench","options":{...}}   run collie bench's timed loop locally.
//   {"t":"end"}     finish and exit.
// Worker -> controller:
//   {"t":"done","id":N,"source":S,"not_member":B,"outputs":[k...]} + one
//     blob per output: the new bytes of the op's tensors k.
//   {"t":"failed","id":N,"kind":K,"error":TEXT}  K: a collie error kind
//     ("unsupported", "invalid_argument", "timeout", ...), "library", or
//     "check": the worker's own finding that the library did the op wrong
//     while saying it succeeded (LibraryCheckFailure).
//   {"t":"bench_rows","rows":[...]} / {"t":"bench_failed","error":TEXT}
//   {"t":"crashed","signal":N}  the worker's process is dying of signal N
//     (its fatal-signal handler says so; the connection closes next).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace collie::remote {

inline constexpr std::size_t kMaxUnauthenticatedBytes = 64 * 1024;
inline constexpr std::size_t kMaxHeaderBytes = 1 << 20;

struct Message {
  nlohmann::json head;
  std::vector<std::vector<std::byte>> blobs;
};

// A message's wire form.
std::vector<std::byte> encode(const nlohmann::json& head, const std::vector<std::span<const std::byte>>& blobs = {});

// Cuts a byte stream into messages. Bounds every length before
// allocating: a header above max_header, or a message whose blobs add up
// to more than max_message, is an error (thrown as std::runtime_error).
class MessageReader {
 public:
  explicit MessageReader(std::size_t max_header = kMaxHeaderBytes, std::size_t max_message = std::size_t{1} << 40)
      : max_header_(max_header), max_message_(max_message) {}
  void set_limits(std::size_t max_header, std::size_t max_message) {
    max_header_ = max_header;
    max_message_ = max_message;
  }
  void feed(const std::byte* data, std::size_t n);
  // The next complete message, if one has arrived.
  std::optional<Message> next();
  std::size_t buffered() const { return buf_.size() - at_; }
  // Binary messages (script/script_protocol.h's requests): a length word L
  // with bit 31 set frames a header of L & ~bit 31 bytes that starts with
  // the u64 little-endian count of payload bytes after it. With this on,
  // next() returns one as a Message whose head is null and whose blobs are
  // {header, payload}; off (the default), such a length is a header too long.
  void accept_binary(bool on) { binary_ = on; }

 private:
  std::vector<std::byte> buf_;
  std::size_t at_ = 0;
  std::size_t max_header_, max_message_;
  bool binary_ = false;
};

// Blocking I/O on a connected socket (workers). read_message throws
// std::runtime_error on EOF or a malformed message.
Message read_message(int fd, MessageReader& reader);
void write_message(int fd, const nlohmann::json& head, const std::vector<std::span<const std::byte>>& blobs = {});

// The hello's proof of the job token.
std::string hello_mac(const std::string& token, const std::string& nonce_hex, int rank);

// Connects to "host:port" (COLLIE_CONTROLLER); throws std::runtime_error.
int connect_to(const std::string& address);

}  // namespace collie::remote
