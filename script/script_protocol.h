// The script protocol: how the Python processes of an unmodified
// torch.distributed program (`collie run -- python script.py`) talk to the
// collie controller. The direction is the reverse of the op protocol's
// (backends/remote/op_protocol.h): the ops originate in the program's
// processes, and the controller -- which runs every rank's ops on the chosen
// backend, records them for the oracle and judges the run -- answers.
// The Python side is script/python/collie_script/.
//
// Framing. A message is [u32 little-endian L][header][blobs]. Bit 31 of L
// (kBinaryFlag) says which header follows, of L & ~kBinaryFlag bytes:
//  - clear: a JSON object (the op protocol's framing), its "blobs" listing
//    each attachment's length. Every message may be sent this way.
//  - set: binary, for the hot messages only. From the controller, a binary
//    answer (BinaryAnswer below): "done" without a failure, "issued",
//    "pending"; a process reads one as the JSON answer it stands for. From
//    a process, a binary request (below): op, wait, test.
//
// Handshake. A process connects to COLLIE_SCRIPT_UNIX (a socket path) when
// it exists on its host, else to COLLIE_SCRIPT_CONTROLLER (host:port), the
// first time it has something to say; the controller sends
// {"t":"challenge","nonce":HEX}; the process answers
//   {"t":"hello","pid":P,"ppid":PP,"argv":[...],"mac":HEX}
// with mac = hex(HMAC-SHA256(COLLIE_JOB_TOKEN, "collie script " + nonce +
// " " + P)). Nothing else is read from a connection before its mac checks.
//
// Process -> controller. Requests carry "id" (the process's own counter)
// and get exactly one answer echoing it; a process has at most one request
// outstanding. "where" is the program's call stack at the call, innermost
// first: [[file, line, function], ...] (torch's and collie's frames left out).
//   {"t":"init","rank":R,"world":W,"backend":B,"timeout_ns":T?,"where":..}
//        init_process_group: this process is rank R of W (B: the name the
//        script gave). -> {"t":"ready","group":0} | {"t":"failed","error":E}
//   {"t":"group","ranks":[..],"timeout_ns":T?,"where":..}
//        new_group, on every rank. -> {"t":"group_made","group":G} | failed
//   {"t":"ungroup","group":G}
//        destroy_process_group(group) of a group new_group made.
//        -> {"t":"ungrouped"} | failed
//   {"t":"op","group":G, ...the call as call_codec.h encodes it, without
//        "writes"..., "where":..} + one blob per buffer
//        -> blocking ("async": false): {"t":"done","op":K,"source":S,
//           "outputs":[k..]} + one blob per output (the new bytes of the
//           call's buffer k), or {"t":"failed","op":K,"error":E,"kind":K2};
//           "at_issue": true when the call was refused before it started.
//        -> async: {"t":"issued","op":K} (or failed). K names it later.
//   {"t":"wait","op":K,"where":..}   Work.wait()  -> done | failed
//   {"t":"test","op":K}              Work.is_completed() -> done | failed |
//        {"t":"pending","op":K}
// Binary requests carry the same fields; JSON ones stay valid (a process
// sends its ops in binary once it knows the codes, from "ready").
//   "ready" also says the codes binary requests use:
//        "codes": {"ops": [..], "dtypes": [..], "reduce_ops": [..]}: op
//        kinds (blocking names, "send" for isend too), dtypes and reduce
//        ops, each numbered by its place in its list.
// Notes (no answer):
//   {"t":"out"} + one blob: bytes the process wrote to fd 1 or 2, in order.
//   {"t":"exception","type":T,"message":M,"traceback":TEXT,"where":..}
//        an exception ends the process's program.
//   {"t":"exit","code":C|null}   the program ended (code, when known).
//
// Binary answers (all little-endian, no padding):
//   u8 type (1 done, 2 issued, 3 pending), u8 0, u16 n_outputs,
//   i32 source (-1: none), u64 id, u64 op,
//   then n_outputs x (u32 buffer index k, u64 blob bytes),
// then the n_outputs blobs. It means the JSON answer
//   {"t":TYPE,"id":id,"op":op,"outputs":[k..],"source":source (when >= 0)}.
// The controller answers in binary only a request whose "id" is a
// non-negative integer.
//
// Binary requests (all little-endian, no padding). A 32-byte common part:
//   u64 payload bytes P (the blobs after the header, in all),
//   u64 id, u8 type (1 op, 2 wait, 3 test), u8 flags, u16 0,
//   u32 site (the call site, the request's "where"; 0: none),
//   u32 S (> 0: this request defines `site` as the S bytes of JSON --
//          [[file, line, function], ...] -- that end the header), u32 0.
// A process numbers its call sites 1, 2, ... and defines each the first
// time it sends it; later requests name it by number only.
// wait (2), test (3): then u64 op. No blobs.
// op (1): flags 1 async, 2 any_source (a receive from any rank),
//   4 wait_all_ranks; then
//     u8 kind (a code of "ops"), u8 reduce_op (of "reduce_ops"),
//     u8 tensor slot's buffers (0 or 1), u8 0, u32 list slot's buffers,
//     u32 output slot's buffers, u32 group, i32 peer (dst/src/root, a
//     global rank), i32 tag, i64 timeout_ns (0: the group's),
//     u32 batch ops (batch_isend_irecv), u32 input splits, u32 output
//     splits, u32 0                                       (80 bytes so far)
//   then per buffer (the slots' in slot order, then the batch ops'):
//     u32 dtype (a code of "dtypes"), u64 count;
//   per batch op: u8 send (1) or receive (0), 3 x u8 0, i32 peer, i32 tag;
//   the input split sizes, then the output ones: u64 each (elements);
//   then the site's JSON when S > 0.
//   P must be the buffers' bytes (count x the dtype's size, summed); the
//   blobs are the buffers' bytes in order. It means the JSON request
//   {"t":"op","id":..,"group":..,"op":..,"async":..,"layout":..,"tensors":..,
//    "where":..} with the same call (backends/remote/call_codec.h).
// A request the controller cannot read fails -- {"t":"failed","at_issue":
// true,"error":...} naming the rank -- and when not even its id can be
// read, the run ends with that error.
//
// Virtual time. Every request of a rank blocks the rank in collie; while a
// rank computes (between an answer and its next request) it holds the
// clock: the controller reads its next request before anything else of
// that rank's runs, so the backend's schedule -- and on the simulator the
// whole run -- is a function of the program and the seed. Output that
// arrives between two answers is stamped with the time of the first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/remote/call_codec.h"

namespace collie::script {

// The environment a program runs in.
inline constexpr const char* kControllerEnv = "COLLIE_SCRIPT_CONTROLLER";
inline constexpr const char* kTokenEnv = "COLLIE_JOB_TOKEN";
inline constexpr const char* kStreamEnv = "COLLIE_SCRIPT_STREAM";
// A Unix socket of the same controller: processes on its host connect
// there instead (the kernel's loopback TCP is a third of an op's cost).
inline constexpr const char* kUnixEnv = "COLLIE_SCRIPT_UNIX";

// The framing's flag in the length word: the header is a BinaryAnswer.
inline constexpr std::uint32_t kBinaryFlag = 0x80000000u;

// A binary answer's fixed part (see above); `outputs` the written buffers.
struct BinaryAnswer {
  enum class Type : std::uint8_t { kDone = 1, kIssued = 2, kPending = 3 };
  Type type = Type::kDone;
  std::int32_t source = -1;
  std::uint64_t id = 0;
  std::uint64_t op = 0;
};

// The whole message: length word, header, then the blobs (one per output,
// `outputs[i]` naming blob i's buffer).
std::vector<std::byte> encode_binary_answer(const BinaryAnswer& a, const std::vector<std::size_t>& outputs,
                                            const std::vector<std::span<const std::byte>>& blobs);

// A binary request's common part and its fixed sizes.
inline constexpr std::size_t kRequestCommonBytes = 32;
inline constexpr std::size_t kOpRequestFixedBytes = 80;
inline constexpr std::size_t kWaitRequestBytes = 48;
struct BinaryRequest {
  enum class Type : std::uint8_t { kOp = 1, kWait = 2, kTest = 3 };
  enum Flags : std::uint8_t { kAsync = 1, kAnySource = 2, kWaitAllRanks = 4 };
  Type type = Type::kOp;
  std::uint8_t flags = 0;
  std::uint64_t id = 0;
  std::uint32_t site = 0;
  std::string_view site_json;  // the definition, when there is one: points into the header
  std::uint64_t op = 0;        // wait, test
  std::int64_t timeout_ns = 0; // wait: Work.wait(timeout) (0: none); test: 0
};

// Reads a binary request's common part (and a wait's or test's op).
// Throws std::runtime_error saying what is malformed; `*id` is set as soon
// as the id is read (so that the refusal can name the request).
BinaryRequest read_binary_request(std::span<const std::byte> header, std::optional<std::uint64_t>* id);

// Decodes a binary op request (header, payload) into a call over buffers
// of its own (its group is the caller's to set; `*group` is the number the
// process gave). Throws std::runtime_error saying what is malformed.
remote::DecodedCall decode_binary_op(std::span<const std::byte> header, std::span<const std::byte> payload,
                                     std::uint32_t* group);

// The hello's proof of the run's token for process `pid`.
std::string script_hello_mac(const std::string& token, const std::string& nonce_hex, long pid);

}  // namespace collie::script
