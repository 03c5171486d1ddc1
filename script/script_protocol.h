// The script protocol: how the Python processes of an unmodified
// torch.distributed program (`collie run -- python script.py`) talk to the
// collie controller. The direction is the reverse of the op protocol's
// (backends/remote/op_protocol.h): the ops originate in the program's
// processes, and the controller -- which runs every rank's ops on the chosen
// backend, records them for the oracle and judges the run -- answers.
// The Python side is script/python/collie_script/.
//
// Framing is the op protocol's: [u32 little-endian N][N bytes of a JSON
// object][blobs], the object's "blobs" listing each attachment's length.
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
// Notes (no answer):
//   {"t":"out"} + one blob: bytes the process wrote to fd 1 or 2, in order.
//   {"t":"exception","type":T,"message":M,"traceback":TEXT,"where":..}
//        an exception ends the process's program.
//   {"t":"exit","code":C|null}   the program ended (code, when known).
//
// Virtual time. Every request of a rank blocks the rank in collie; while a
// rank computes (between an answer and its next request) it holds the
// clock: the controller reads its next request before anything else of
// that rank's runs, so the backend's schedule -- and on the simulator the
// whole run -- is a function of the program and the seed. Output that
// arrives between two answers is stamped with the time of the first.
#pragma once

#include <string>

namespace collie::script {

// The environment a program runs in.
inline constexpr const char* kControllerEnv = "COLLIE_SCRIPT_CONTROLLER";
inline constexpr const char* kTokenEnv = "COLLIE_JOB_TOKEN";
inline constexpr const char* kStreamEnv = "COLLIE_SCRIPT_STREAM";
// A Unix socket of the same controller: processes on its host connect
// there instead (the kernel's loopback TCP is a third of an op's cost).
inline constexpr const char* kUnixEnv = "COLLIE_SCRIPT_UNIX";

// The hello's proof of the run's token for process `pid`.
std::string script_hello_mac(const std::string& token, const std::string& nonce_hex, long pid);

}  // namespace collie::script
