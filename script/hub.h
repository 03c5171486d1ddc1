// The controller's end of the script protocol (script_protocol.h): the
// listening socket, a connection per process of the program, the program's
// own pipes, and which process is which rank.
//
// Used from one thread. A rank's program in the controller (script_rank.h)
// asks next(rank) for its rank's next request and blocks there -- which is
// what holds the clock while the rank computes -- while the hub keeps
// serving everything else: new connections, every process's output (stamped
// and merged, output_merge.h), notes, other ranks' requests (queued for
// them). Requests are handed out per rank in the order the rank sent them,
// so nothing depends on how the processes' messages interleave in wall
// time.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/remote/child_processes.h"
#include "backends/remote/op_protocol.h"
#include "core/executor.h"
#include "script/output_merge.h"
#include "script/script_protocol.h"

namespace collie::script {

struct HubOptions {
  std::string listen_host = "127.0.0.1";
  // A joined rank that sends no request for this long (wall time) is stuck:
  // it computes, or waits for something collie cannot see.
  Nanos compute_timeout_ns = 300'000'000'000;
  // Every rank calls init_process_group within this long of the first one
  // (and the first one within this long of the start).
  Nanos join_timeout_ns = 120'000'000'000;
};

// What next(rank) hands out.
struct Incoming {
  enum class Kind {
    kRequest,  // `message`: the rank's next request or note
    kEnded,    // its process ended (or the program ended before it joined): `why`
    kSilent,   // no request for the compute timeout: `why`
    kAborted,  // the run is being given up (Hub::fatal()): `why`
  } kind = Kind::kRequest;
  remote::Message message;
  std::string why;
};

class Hub {
 public:
  Hub(HubOptions options, OutputMerge& output);
  ~Hub();
  Hub(const Hub&) = delete;
  Hub& operator=(const Hub&) = delete;

  // Where the program's processes connect (host:port, and a Unix socket
  // for those on this host), and the token they prove.
  const std::string& address() const { return address_; }
  const std::string& unix_path() const { return unix_path_; }
  const std::string& token() const { return token_; }

  // The processes the command started (direct children): their pipes carry
  // what they write before their capture starts (and all a program that is
  // not Python writes); their exit statuses say how they ended.
  void watch(remote::ChildProcesses* children);

  // Waits until some process calls init_process_group and returns the world
  // size it declares. nullopt when the program's processes all ended first,
  // or none called it within the join timeout; `why` says which.
  std::optional<int> await_world(std::string* why);

  // Rank `rank`'s next request or note, in the order its process sent them.
  Incoming next(int rank);
  // Answers the request a rank's process waits on.
  void answer(int rank, const nlohmann::json& head, const std::vector<std::span<const std::byte>>& blobs = {});
  // The same in binary (script_protocol.h): done, issued, pending.
  void answer(int rank, const BinaryAnswer& a, const std::vector<std::size_t>& outputs = {},
              const std::vector<std::span<const std::byte>>& blobs = {});

  // Gives the run up: every next() returns kAborted with `why` (the first
  // reason is kept).
  void abort(const std::string& why);
  const std::string& fatal() const { return fatal_; }

  // Every process the hub has seen: the command's own and every one that
  // connected.
  std::vector<long> pids() const;
  // The process of `rank` (-1 before it joins).
  long pid_of(int rank) const;
  // SIGKILLs the process of `rank` (a crash fault).
  void kill_rank(int rank);

  // Ends the program: kills every process that is still running (at once
  // with `kill`, else after `grace_ns` of waiting for them to end), taking
  // their output, until every connection has closed.
  void finish(bool kill, Nanos grace_ns);

  // Processes that never became ranks but failed (an exception, a non-zero
  // exit), one block each; and the last lines they wrote.
  std::vector<std::string> other_failures() const { return other_failures_; }
  std::string recent_other_output() const;

 private:
  struct Conn;
  void poll_once(int timeout_ms);
  void accept_one(int listen_fd);
  void on_readable(std::size_t c);
  void on_message(std::size_t c, remote::Message m);
  void on_init(std::size_t c, remote::Message m);
  void on_closed(std::size_t c);
  void on_output(std::size_t c, const std::vector<std::byte>& bytes);
  void write_to(Conn& c, const nlohmann::json& head, const std::vector<std::span<const std::byte>>& blobs);
  void write_bytes(Conn& c, const std::vector<std::byte>& bytes);
  std::string fate_of(Conn& c);
  bool program_gone();
  std::string label(const Conn& c) const;
  Nanos wall() const;

  HubOptions options_;
  OutputMerge& output_;
  std::chrono::steady_clock::time_point t0_;
  int listen_fd_ = -1;
  int unix_fd_ = -1;
  std::string address_, token_;
  std::string unix_dir_, unix_path_;
  remote::ChildProcesses* children_ = nullptr;
  std::vector<std::string> child_partial_;
  std::vector<std::unique_ptr<Conn>> conns_;
  int world_ = 0;
  Nanos world_declared_at_ = -1;
  std::string first_init_text_;                // "rank 0 (script.py:10)"
  std::vector<int> rank_conn_;                 // by rank: index into conns_, -1 until it joins
  std::vector<std::deque<remote::Message>> inbox_;
  std::vector<Nanos> answered_at_;             // by rank: wall time of its last answer
  std::string fatal_;
  std::vector<std::string> other_failures_;
  std::deque<std::string> other_tail_;         // the last lines of processes that are not ranks
};

// "script.py:12 (in run)" for a "where" stack's innermost frame; "" if none.
std::string where_text(const nlohmann::json& where);

}  // namespace collie::script
