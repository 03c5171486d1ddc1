// One rank of a program run under collie (`collie run -- python ...`), as
// the controller runs it: a coroutine over the rank's Dist (core/dist.h)
// that takes the rank's requests from its process (through the Hub) in the
// order it sent them, makes each call on the Dist exactly as the scenario
// interpreter would -- a DistCall decoded by call_codec.h, recorded by the
// CallRecorder for the oracle, dispatched by core/op.h's dispatch() -- and
// answers with the results.
//
// While the rank's process computes, the coroutine waits for its next
// request without yielding to the executor: the rank holds the clock.
// When the process ends, its ops still in flight are awaited (as a
// scenario's unfinished handles are), and the rank ends as the process did:
// normally, with the first error an op of it failed with (which the
// program may have caught), with the exception the program raised, or with
// how its process died.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/job.h"
#include "check/call_recorder.h"
#include "core/dist.h"
#include "core/task.h"
#include "script/hub.h"

namespace collie::script {

// What every rank of one run shares.
struct RankContext {
  Hub* hub = nullptr;
  OutputMerge* output = nullptr;
  check::OpRecords* records = nullptr;  // null: the oracle is not applied
  bool keep_calls = false;              // keep every call for --record
  // Whether an async op's Work completes without being waited for (false on
  // process backends: see script_rank.cpp's polls).
  bool polls_see_completion = true;
  // Process backends: SIGKILL the program's rank process just before it
  // issues its op K (as the job kills the rank's worker there).
  std::vector<ProcessFault> process_crashes;
  // In-process backends with crash faults: after each op, ask the job
  // whether it crashed the rank, and kill the process that was that rank.
  const Job* job = nullptr;
  bool watch_crashes = false;
};

// A call site: the program's stack at a call, innermost first --
// [[file, line, function], ...] -- and where_text() of it. Shared by every
// call made there (the process defines each site once).
struct Site {
  nlohmann::json where;
  std::string text;
};
using Where = std::shared_ptr<const Site>;  // null: none known
Where make_where(nlohmann::json where);

// What reports say about a rank.
struct RankView {
  enum class State { kNotJoined, kComputing, kInCollie, kEnded };
  State state = State::kNotJoined;
  Where init_where;                  // where it called init_process_group
  std::string in_call;               // kInCollie: the call it waits in ("recv(src=0) on world")
  Where in_call_where;
  std::string last_call;             // the last call it made
  Where last_call_where;
  // Async ops it started and never waited for (the call, where).
  std::vector<std::pair<std::string, Where>> unfinished;
  std::string ended;                 // how its process ended
  std::string traceback;             // the exception it raised, if any
  std::string exception_type;        // its type ("CollieError": an op's error, raised by the hook)
  std::string exception_message;
  bool killed_by_fault = false;
};

// One thing a rank did, kept for --record (script/record.h).
struct KeptCall {
  enum class Kind { kGroup, kDestroyGroup, kOp, kWait } kind = Kind::kOp;
  std::vector<int> ranks;            // kGroup: the members
  int group = 0;                     // kGroup, kDestroyGroup: its number; kOp: the op's group
  remote::Message request;           // kOp: the request as the process sent it (inputs as issued)
  std::uint64_t op = 0;              // kOp, kWait: the op's number on this rank
  bool async = false;                // kOp: the process keeps a handle
};

// A message a rank sent (send, isend, or an isend of a batch), for the
// check that every message sent was received.
struct SentMessage {
  int dst = -1;
  int tag = 0;
  std::string group;                 // as the records name it ("world")
  std::string call;                  // call_text()
  Where where;
};

class ScriptRank {
 public:
  ScriptRank(int rank, int world, RankContext context);
  ~ScriptRank();
  ScriptRank(const ScriptRank&) = delete;
  ScriptRank& operator=(const ScriptRank&) = delete;

  // The rank's program: serves its process until the process ends.
  Task<void> serve(Dist& dist);

  const RankView& view() const { return view_; }
  const std::vector<KeptCall>& kept() const { return kept_; }
  const std::vector<SentMessage>& sent() const { return sent_; }
  // Differences from torch this rank's run had, each a sentence (a note).
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  struct Pending;
  Task<void> handle(const remote::Message& m);
  Task<void> handle_binary(const remote::Message& m);
  Task<void> on_op(const remote::Message& m);
  // Makes the call p->call holds (its group `gid`, as the process numbers
  // them); `request`: the JSON request it came in (null: binary).
  Task<void> start_op(std::unique_ptr<Pending> p, std::size_t gid, const nlohmann::json& request_id,
                      const remote::Message* request);
  // `timeout_ns` > 0: the program's Work.wait(timeout) -- a wait the op
  // outlasts is answered with a timeout error, and the op stays pending.
  Task<void> on_wait(std::uint64_t op, Where where, const nlohmann::json& request_id, Nanos timeout_ns = 0);
  Task<void> settle(std::uint64_t op, const nlohmann::json& request_id, Nanos timeout_ns = 0);
  Task<void> on_test(std::uint64_t op, const nlohmann::json& request_id);
  Task<void> finish();
  void answer_outcome(std::uint64_t op, Pending& p, const nlohmann::json& request_id, std::exception_ptr error);
  void check_crash(std::uint64_t op_count);
  void stamp();

  int rank_;
  int world_;
  RankContext ctx_;
  Dist* dist_ = nullptr;
  std::unique_ptr<check::CallRecorder> recorder_;
  std::vector<Group> groups_;  // by the number the process knows them by; 0 is the world
  std::vector<Where> sites_;   // by the number the process gave them (binary requests); 0: none
  std::map<std::uint64_t, std::unique_ptr<Pending>> pending_;
  std::uint64_t ops_ = 0;
  std::exception_ptr first_error_;
  nlohmann::json exception_;
  RankView view_;
  std::vector<KeptCall> kept_;
  std::vector<SentMessage> sent_;
  SpawnRegistry wait_timers_;  // the deadlines of waits with a timeout
  std::vector<std::string> notes_;
};

// How reports name a call: "recv(src=0, tag 0, float32 x 1) on world".
std::string call_text(const DistCall& c, int rank);

}  // namespace collie::script
