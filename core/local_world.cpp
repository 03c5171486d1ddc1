#include "core/local_world.h"

#include <map>
#include <sstream>

#include "core/error.h"
#include "core/send_scribble.h"
#include "core/transport_call.h"

namespace collie {

namespace {

// How long, on the transport's clock, a world waits after its run for the
// send completions still owed (LocalWorld::run).
constexpr Nanos kOwedCompletionsGraceNs = 1'000'000'000;

struct Yield {
  Executor* e;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const {
    TransportCall call("schedule()");
    e->schedule(h);
  }
  void await_resume() const {
    if (TransportCall::current()) [[unlikely]] note_resumed_inside_call(e, "the start of a rank's program");
    restore_scribbles(e);
  }
};

}  // namespace

Spawned run_rank(const std::function<Task<void>(Dist&)>& program, Dist& dist, RankOutcome& out, std::size_t& finished) {
  co_await Yield{&dist.executor()};  // start inside the executor, in its order
  try {
    co_await program(dist);
  } catch (...) {
    out.error = std::current_exception();
  }
  out.finished = true;
  out.end_time = dist.executor().now();
  ++finished;
}

bool RunResult::ok() const {
  if (deadlocked || !transport_fault.empty()) return false;
  for (const RankOutcome& r : ranks)
    if (!r.finished || r.error || r.crashed) return false;
  return true;
}

std::string RunResult::describe() const {
  if (!transport_fault.empty()) return transport_fault + (deadlock_report.empty() ? "" : "\n" + deadlock_report);
  // The error that ended first: the others often follow from it (a peer
  // timing out on a receiver that had failed at once); ties, the lowest rank.
  std::size_t first = ranks.size();
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i].error && (first == ranks.size() || ranks[i].end_time < ranks[first].end_time)) first = i;
  if (first < ranks.size()) {
    try {
      std::rethrow_exception(ranks[first].error);
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "rank " + std::to_string(first) + " threw a non-standard exception";
    }
  }
  if (deadlocked) return deadlock_report;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i].crashed) return "rank " + std::to_string(i) + " crashed (an injected fault)";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (!ranks[i].finished) return "rank " + std::to_string(i) + " never finished its program";
  return "ok";
}

LocalWorld::LocalWorld(std::vector<Transport*> transports, CommunicatorOptions options) {
  if (transports.empty()) throw Error(ErrorKind::kInvalidArgument, OpContext{}, "world size must be at least 1");
  comms_.reserve(transports.size());
  const auto shared = std::make_shared<const CommunicatorOptions>(std::move(options));
  for (Transport* t : transports) comms_.push_back(std::make_unique<Communicator>(*t, shared));
  programs_ = std::make_unique<SpawnRegistry>();
}

LocalWorld::~LocalWorld() {
  // Suspended rank programs first: they hold Works of the communicators.
  programs_.reset();
  comms_.clear();
}

std::string LocalWorld::diagnose_collective_mismatch() const {
  // Blocked collectives with the same (group context, sequence number) must
  // have the same fingerprint on every rank; any difference is the cause.
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::map<std::string, std::vector<int>>> calls;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::string> group_of;
  for (std::size_t r = 0; r < comms_.size(); ++r) {
    for (const auto& rc : comms_[r]->engine().running_collectives()) {
      calls[{rc.context, rc.fp.seq}][describe_call(rc.fp)].push_back(static_cast<int>(r));
      group_of[{rc.context, rc.fp.seq}] = rc.group;
    }
  }
  std::ostringstream os;
  for (const auto& [key, variants] : calls) {
    if (variants.size() < 2) continue;
    os << "  collective_mismatch on " << group_of[key] << " #" << key.second << ":";
    const char* sep = " ";
    for (const auto& [call, ranks] : variants) {
      os << sep << "rank" << (ranks.size() > 1 ? "s " : " ");
      for (std::size_t i = 0; i < ranks.size(); ++i) os << (i ? "," : "") << ranks[i];
      os << " called " << call;
      sep = "; ";
    }
    os << "\n";
  }
  return os.str();
}

RunResult LocalWorld::run(const RankProgram& program, const RunContext& context) {
  const std::size_t n = comms_.size();
  RunResult res;
  res.ranks.resize(n);
  std::size_t finished = 0;
  std::uint64_t frames_before = 0;
  for (const auto& c : comms_) frames_before += c->engine().frames_received();
  const std::function<Task<void>(Dist&)> as_dist = [&program](Dist& d) { return program(static_cast<Communicator&>(d)); };
  for (std::size_t r = 0; r < n; ++r) programs_->spawn(run_rank(as_dist, *comms_[r], res.ranks[r], finished));
  Transport& exec = comms_[0]->transport();
  auto all_finished_or_crashed = [&] {
    for (std::size_t r = 0; r < n; ++r)
      if (!res.ranks[r].finished && !(context.crashed && context.crashed(static_cast<int>(r)))) return false;
    return true;
  };
  bool stuck = false;
  try {
    // Done when every rank finished or crashed (a crashed rank's program
    // never resumes again). Crashes are counted only when a rank finished
    // since the last count, not on every turn of the executor: a rank that
    // crashes after all the others finished ends the run through the
    // executor's report that nothing can move (below).
    std::size_t counted_at = 0;  // `finished` when crashes were last counted
    auto done = [&] {
      if (finished == n) return true;
      if (!context.crashed || finished == counted_at) return false;
      counted_at = finished;
      return all_finished_or_crashed();
    };
    exec.run_until(done, std::nullopt);
    if (finished != n && !all_finished_or_crashed()) {
      // No deadline was given: returning early breaks the executor's
      // contract. Blame the transport, and say what the ranks waited for.
      std::string unfinished;
      for (std::size_t r = 0; r < n; ++r)
        if (!res.ranks[r].finished) unfinished += (unfinished.empty() ? "" : ", ") + std::to_string(r);
      res.transport_fault = "transport: run_until returned before every rank finished (unfinished: rank" +
                            std::string(n - finished > 1 ? "s " : " ") + unfinished +
                            ") without reporting a deadlock; core/executor.h: it runs until done, or throws "
                            "Error(kDeadlock) when nothing can progress";
      stuck = true;
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kDeadlock) throw;
    // Nothing waits when only crashed ranks never finished: no deadlock.
    stuck = res.deadlocked = !all_finished_or_crashed();
    // A pending timer can still make progress (it fails an op): a
    // deadlock reported before it fired is the transport's fault.
    for (std::size_t r = 0; stuck && r < n && res.transport_fault.empty(); ++r) {
      const Communicator& c = *comms_[r];
      if (c.timers_pending() == 0 || (context.crashed && context.crashed(static_cast<int>(r)))) continue;
      const auto when = c.earliest_timer();
      res.transport_fault = "transport: run_until reported a deadlock (" + std::string(e.what()) + ") at t=" +
                            std::to_string(exec.now()) + " ns while rank " + std::to_string(r) +
                            " had an op timeout armed" +
                            (when ? " for t=" + std::to_string(*when) + " ns" : std::string()) +
                            " with schedule_at(); core/executor.h: a timer resumes once now() reaches its time, "
                            "so nothing is stuck while one is pending -- the transport lost this timer (or never fires any)";
    }
    // ... and so is one reported while a send's completion is owed: with
    // nothing left to do the transport has made every completion it ever
    // will (a survivor waiting on a completion dropped at a peer's loss
    // passed a scenario that expected another rank's error).
    for (std::size_t r = 0; stuck && r < n && res.transport_fault.empty(); ++r) {
      if ((context.crashed && context.crashed(static_cast<int>(r))) || !comms_[r]->engine().owes_completions()) continue;
      const std::vector<std::string> owed = comms_[r]->engine().owed_completions();
      res.transport_fault = "transport: run_until reported a deadlock (" + std::string(e.what()) + ") at t=" +
                            std::to_string(exec.now()) + " ns while " + owed.front() +
                            (owed.size() > 1 ? " and " + std::to_string(owed.size() - 1) + " more" : std::string()) +
                            " still had no on_send_complete(): with nothing left to do the transport owes nothing; "
                            "core/transport.h: every send posted with a cookie is completed exactly once";
    }
  }
  // Completions the transport still owes once every rank is done (a NACK's,
  // which no op waits for; a send whose op was given up): it runs until it
  // made them or has nothing left to do, and any it forgot are its fault.
  if (!stuck && res.transport_fault.empty()) {
    auto owing = [&](std::size_t r) {
      return !(context.crashed && context.crashed(static_cast<int>(r))) && comms_[r]->engine().owes_completions();
    };
    auto owes = [&] {
      for (std::size_t r = 0; r < n; ++r)
        if (owing(r)) return true;
      return false;
    };
    if (owes()) {
      try {
        exec.run_until([&] { return !owes(); }, exec.now() + kOwedCompletionsGraceNs);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kDeadlock) throw;  // ran dry: what is owed now never comes
      }
      std::vector<std::string> owed;
      for (std::size_t r = 0; r < n; ++r)
        if (owing(r))
          for (std::string& line : comms_[r]->engine().owed_completions()) owed.push_back(std::move(line));
      if (!owed.empty()) {
        std::string list;
        for (std::size_t i = 0; i < owed.size() && i < 3; ++i) list += (i ? "; " : "") + owed[i];
        if (owed.size() > 3) list += "; and " + std::to_string(owed.size() - 3) + " more";
        res.transport_fault = "transport: " + std::to_string(owed.size()) + " send" + (owed.size() > 1 ? "s" : "") +
                              " never completed (no on_send_complete() by t=" + std::to_string(exec.now()) +
                              " ns, after every rank had finished and the transport ran dry or " +
                              std::to_string(kOwedCompletionsGraceNs / 1'000'000) + " ms passed): " + list +
                              "; core/transport.h: every send posted with a cookie is completed exactly once";
      }
    }
  }
  // A contract violation fails the run even when every op had finished
  // before it showed (the last completion came twice, a coroutine was
  // resumed inside the last call): no violation is ever silent.
  for (const auto& c : comms_) {
    c->engine().restore_scribbled();  // the buffers as the ranks left them, for whoever reads them next
    c->engine().settle();
  }
  for (std::size_t r = 0; r < n && res.transport_fault.empty(); ++r)
    if (const std::string& v = comms_[r]->engine().contract_broken(); !v.empty())
      res.transport_fault = v;
  if (stuck) {
    DiagnosisInput in;
    in.now = exec.now();
    in.label = context.label;
    in.replay = context.replay;
    if (context.faults) in.faults = context.faults();
    for (std::size_t r = 0; r < n; ++r) {
      RankSnapshot s;
      s.finished = res.ranks[r].finished;
      if (res.ranks[r].error) {
        try {
          std::rethrow_exception(res.ranks[r].error);
        } catch (const std::exception& x) {
          s.error = x.what();
        } catch (...) {
          s.error = "error";
        }
      }
      s.crashed = context.crashed && context.crashed(static_cast<int>(r));
      MessageEngine& eng = comms_[r]->engine();
      if (!s.finished && !s.crashed) {
        s.waits = eng.waits();
        s.collectives = eng.running_collectives();
      }
      s.unmatched = eng.unmatched();
      s.held = eng.held_for_order();
      if (!s.crashed) s.owed = eng.owed_completions();
      in.ranks.push_back(std::move(s));
    }
    Diagnosis d = diagnose(in);
    res.blocked_ranks = d.blocked;
    res.causes = d.causes;
    res.deadlock_dot = d.dot;
    res.deadlock_report = d.report;
    const std::string mismatch = diagnose_collective_mismatch();
    if (!mismatch.empty()) {
      // Before the replay line: mismatched calls are the likeliest cause.
      const auto at = res.deadlock_report.rfind("replay: ");
      const std::string block = "mismatched collectives:\n" + mismatch;
      if (at == std::string::npos) res.deadlock_report += block;
      else res.deadlock_report.insert(at, block);
    }
  }
  if (context.crashed)
    for (std::size_t r = 0; r < n; ++r) res.ranks[r].crashed = context.crashed(static_cast<int>(r));
  for (const RankOutcome& o : res.ranks) res.end_time = std::max(res.end_time, o.end_time);
  res.stopped_at = exec.now();
  for (const auto& c : comms_) res.frames += c->engine().frames_received();
  res.frames -= frames_before;
  return res;
}

}  // namespace collie
