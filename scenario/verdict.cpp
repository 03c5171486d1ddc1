#include "scenario/verdict.h"

#include <algorithm>
#include <regex>

#include "check/op_checks.h"

namespace collie::scenario {

std::string error_text(const std::exception_ptr& e, ErrorKind* kind, bool* is_collie) {
  *is_collie = false;
  *kind = ErrorKind::kUsage;
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    *kind = x.kind();
    *is_collie = true;
    return x.what();
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "non-standard exception";
  }
}

namespace {

struct RankError {
  int rank;
  ErrorKind kind;
  bool is_collie;
  std::string text;
  bool process_died = false;  // a process job's rank whose process ended: it raised nothing
  bool check_failure = false;  // the worker's own finding (LibraryCheckFailure): no expected error
};

bool is_check_failure(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const LibraryCheckFailure&) {
    return true;
  } catch (...) {
    return false;
  }
}

// How much an error explains a failed run: mismatches and bad arguments
// first, a library's own errors next, then timeouts and lost peers (which
// are usually consequences).
int cause_rank(const RankError& e) {
  if (!e.is_collie) return e.process_died ? 4 : 2;
  switch (e.kind) {
    case ErrorKind::kCollectiveMismatch:
    case ErrorKind::kGroupMismatch:
    case ErrorKind::kSizeMismatch:
    case ErrorKind::kDTypeMismatch:
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kUsage:
      return 0;
    case ErrorKind::kTimeout:
      return 3;
    case ErrorKind::kTransport:
      return 4;
    default:
      return 1;
  }
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s.empty() ? "none" : s;
}

}  // namespace

namespace {
template <typename Deviation>
void expected_outcome(const Scenario& s, const RunResult& run, const std::vector<RankError>& errors, const Judge& how,
                      Verdict& v, Deviation& deviation);
void judge_process_faults(const RunResult& run, const std::vector<RankError>& errors, const Judge& how, Verdict& v);
}  // namespace

Verdict judge(const Scenario& s, const RunResult& run, const RunLog& log, const Judge& how) {
  Verdict v;
  // Deviations that a library may make where torch is silent: notes for it,
  // failures for collie's core or under --strict.
  const bool lenient = !how.collie_core && !how.strict;
  // Values (expect steps, the oracle's checks) are unspecified only in a
  // scenario unspecified as a whole; `unspecified_outcome` leaves only
  // how the run ends open (expected_outcome).
  const bool unspecified_scenario = !s.unspecified.empty();
  auto deviation = [&](std::string text, bool unspecified) {
    if (unspecified && lenient) v.notes.push_back(std::move(text));
    else v.failures.push_back(std::move(text));
  };

  // A transport that broke the executor's contract left ranks unfinished:
  // never a pass, whatever the scenario expects.
  if (!run.transport_fault.empty()) {
    v.outcome = "error";
    v.detail = run.transport_fault + (run.deadlock_report.empty() ? "" : "\n" + run.deadlock_report);
    v.failures.push_back(v.detail);
    return v;
  }
  // What happened.
  std::vector<RankError> errors;
  for (std::size_t r = 0; r < run.ranks.size(); ++r) {
    const RankOutcome& o = run.ranks[r];
    if (o.error) {
      RankError e{static_cast<int>(r), ErrorKind::kUsage, false, ""};
      e.text = error_text(o.error, &e.kind, &e.is_collie);
      if (e.is_collie && e.kind == ErrorKind::kUnsupported) {
        v.skipped = true;
        if (v.skip_reason.empty()) v.skip_reason = e.text;
        continue;
      }
      e.process_died = !o.fate.empty();
      e.check_failure = is_check_failure(o.error);
      errors.push_back(std::move(e));
    } else if (!o.fate.empty() && !run.stalled) {
      errors.push_back(RankError{static_cast<int>(r), ErrorKind::kTransport, false,
                                 "rank " + std::to_string(r) + "'s process " + o.fate, true});
    }
  }
  if (v.skipped) {
    v.outcome = "skipped";
    v.detail = v.skip_reason;
    return v;
  }
  if (!run.deadlocked) {
    for (const auto& f : how.injected) {
      if (f.kind != InjectedFault::Kind::kCrash) continue;
      // The survivors finished; the job still lost a rank.
      errors.push_back(RankError{f.src, ErrorKind::kTransport, true,
                                 "transport: rank " + std::to_string(f.src) + " crashed (" + f.text + ")"});
    }
  }
  // The likeliest cause first: a rank that saw the ranks disagree explains
  // why another timed out or lost its peer, not the other way round.
  std::stable_sort(errors.begin(), errors.end(), [](const RankError& a, const RankError& b) {
    return cause_rank(a) < cause_rank(b);
  });
  if (!errors.empty()) {
    v.outcome = "error";
    v.detail = errors.front().text;
  } else if (run.deadlocked) {
    v.outcome = run.stalled ? "hang" : "deadlock";
    v.detail = run.deadlock_report;
  } else {
    v.outcome = "ok";
  }
  if (run.deadlocked && !errors.empty()) v.detail += "\n" + run.deadlock_report;

  if (!how.process_faults.empty()) {
    judge_process_faults(run, errors, how, v);
  } else {
    expected_outcome(s, run, errors, how, v, deviation);
  }
  // A library that did an op wrong while saying it succeeded fails the run
  // whatever it expects (a wait(timeout) that returned instead of raising
  // passed a scenario expecting that rank's timeout error).
  if (s.outcome.kind != Outcome::kOk || !how.process_faults.empty())
    for (const RankError& e : errors)
      if (e.check_failure)
        v.failures.push_back(e.text + " (what the rank's worker saw the library do to an op it said had succeeded: "
                                      "no expected outcome excuses it)");
  for (const auto& f : log.failures) deviation(f, unspecified_scenario);
  for (const auto& f : log.unspecified_failures) deviation(f, true);
  if (how.records_checked) {
    std::vector<check::Finding> findings;
    // A rank killed before its op K issued nothing from K on: what its
    // program recorded there was never sent (a survivor's receive or
    // collective that completed on it is a violation).
    check::NeverIssued never_issued;
    for (const ProcessFault& f : how.process_faults)
      if (f.kind == ProcessFault::Kind::kCrash && f.rank >= 0 && static_cast<std::size_t>(f.rank) < run.ranks.size() &&
          run.ranks[static_cast<std::size_t>(f.rank)].crashed)
        never_issued[f.rank] = f.before_op;
    v.checks += check::check_buffers(log.records, findings);
    v.checks += check::check_collectives(log.records, findings);
    v.checks += check::check_p2p(log.records, findings, never_issued);
    v.checks += check::check_calls_never_made(log.records, never_issued, findings);
    for (auto& f : findings)
      deviation(std::move(f.text), unspecified_scenario || f.kind == check::Finding::Kind::kUnspecified);
  }
  return v;
}

namespace {

template <typename Deviation>
void expected_outcome(const Scenario& s, const RunResult& run, const std::vector<RankError>& errors, const Judge& how,
                      Verdict& v, Deviation& deviation) {
  // How the run ends is unspecified in both forms.
  const bool unspecified_scenario = !s.unspecified.empty() || !s.unspecified_outcome.empty();
  // Against what was expected.
  const Outcome& want = s.outcome;
  const std::string why_unspecified =
      unspecified_scenario
          ? " (torch leaves this unspecified: " + (s.unspecified.empty() ? s.unspecified_outcome : s.unspecified) + ")"
          : std::string();
  switch (want.kind) {
    case Outcome::kOk:
      if (v.outcome != "ok")
        deviation("expected the run to end ok, but: " + v.detail + why_unspecified, unspecified_scenario);
      break;
    case Outcome::kError: {
      bool matched = false;
      for (const RankError& e : errors) {
        if (want.rank && e.rank != *want.rank) continue;
        if (e.process_died && !how.collie_core) continue;  // a library that crashes raised nothing
        if (e.check_failure) continue;                      // not an error the library raised
        if (how.collie_core) {
          // collie's own errors are typed and worded: both must match.
          if (want.error_kind && (!e.is_collie || e.kind != *want.error_kind)) continue;
          if (!want.contains.empty() && e.text.find(want.contains) == std::string::npos) continue;
        }
        matched = true;
      }
      if (matched && !how.collie_core && (want.error_kind || !want.contains.empty()))
        for (const RankError& e : errors)
          if (!e.process_died && (!want.rank || e.rank == *want.rank)) {
            v.notes.push_back("the expected error was raised by the library in its own words (collie's kind and "
                              "text are not compared): " + e.text);
            break;
          }
      if (!matched) {
        std::string w = want.error_kind ? std::string(error_kind_name(*want.error_kind)) : "any";
        // What the named rank itself raised, when the run's first error is
        // another rank's (a garbled refusal on rank 2 hid behind rank 0's).
        std::string got = v.outcome == "ok" ? std::string("the run ended ok") : "got: " + v.detail;
        if (want.rank && v.outcome != "ok") {
          const auto own = std::find_if(errors.begin(), errors.end(),
                                        [&](const RankError& e) { return e.rank == *want.rank; });
          if (own == errors.end())
            got = "rank " + std::to_string(*want.rank) + " raised nothing (the run: " + v.detail + ")";
          else if (v.detail.find(own->text) == std::string::npos)
            got = "rank " + std::to_string(*want.rank) + " raised: " + own->text + " (the run: " + v.detail + ")";
        }
        deviation(want.where.str() + ": expected an error '" + w + "'" +
                      (want.rank ? " on rank " + std::to_string(*want.rank) : "") +
                      (want.contains.empty() || !how.collie_core ? "" : " containing \"" + want.contains + "\"") +
                      ", but " + got + why_unspecified,
                  unspecified_scenario);
      }
      break;
    }
    case Outcome::kDeadlock: {
      std::vector<int> want_ranks = want.deadlocked_ranks;
      std::sort(want_ranks.begin(), want_ranks.end());
      std::vector<int> failed_ranks;  // timed out, or (a library) raised anything
      bool only_timeouts = !errors.empty();
      for (const RankError& e : errors) {
        failed_ranks.push_back(e.rank);
        if (e.process_died || (how.collie_core && (!e.is_collie || e.kind != ErrorKind::kTimeout))) only_timeouts = false;
      }
      std::sort(failed_ranks.begin(), failed_ranks.end());
      failed_ranks.erase(std::unique(failed_ranks.begin(), failed_ranks.end()), failed_ranks.end());
      if (!how.diagnoses_deadlocks && !run.deadlocked && only_timeouts && failed_ranks == want_ranks) {
        // The deadlock, as ranks in processes see it: the blocked ranks'
        // timeouts fired and the others finished.
        if (!how.collie_core)
          v.notes.push_back("the blocked ranks failed with the library's own errors (its timeout): " +
                            errors.front().text);
      } else if (!run.deadlocked) {
        deviation(want.where.str() + ": expected a deadlock, but the run ended " + v.outcome +
                      (v.detail.empty() ? "" : ": " + v.detail) + why_unspecified,
                  unspecified_scenario);
      } else if (run.blocked_ranks != want_ranks) {
        deviation(want.where.str() + ": expected ranks blocked in the deadlock to be exactly " + ranks_text(want_ranks) +
                      ", but they are " + ranks_text(run.blocked_ranks) + why_unspecified,
                  unspecified_scenario);
      } else if (!want.contains.empty() && how.collie_core && how.diagnoses_deadlocks &&
                 run.deadlock_report.find(want.contains) == std::string::npos) {
        v.failures.push_back(want.where.str() + ": the deadlock report does not contain \"" + want.contains + "\"");
      }
      break;
    }
  }
}

std::string seconds(Nanos ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f s", static_cast<double>(ns) / 1e9);
  return b;
}

// What the library did about faults done to its processes: each survivor
// failed with an error (naming the lost rank or not), carried on and
// finished, or hung. A hang fails the run; failing loudly does not.
void judge_process_faults(const RunResult& run, const std::vector<RankError>& errors, const Judge& how, Verdict& v) {
  std::vector<int> crashed;
  for (std::size_t r = 0; r < run.ranks.size(); ++r)
    if (run.ranks[r].crashed) crashed.push_back(static_cast<int>(r));
  for (const ProcessFault& f : how.process_faults) {
    if (f.kind == ProcessFault::Kind::kCrash)
      v.fault_report.push_back("fault " + f.text + ": rank " + std::to_string(f.rank) + "'s process was killed (SIGKILL) " +
                               (std::find(crashed.begin(), crashed.end(), f.rank) != crashed.end()
                                    ? "before its op #" + std::to_string(f.before_op)
                                    : "-- no: it never issued op #" + std::to_string(f.before_op)));
    else
      v.fault_report.push_back("fault " + f.text + ": rank " + std::to_string(f.rank) + "'s process was stopped (SIGSTOP) " +
                               "before its op #" + std::to_string(f.before_op) + " and continued " +
                               std::to_string(f.stall_ms) + " ms later");
  }
  std::vector<int> hung;
  for (std::size_t r = 0; r < run.ranks.size(); ++r) {
    const int rank = static_cast<int>(r);
    if (std::find(crashed.begin(), crashed.end(), rank) != crashed.end()) continue;
    const bool blocked = std::find(run.blocked_ranks.begin(), run.blocked_ranks.end(), rank) != run.blocked_ranks.end();
    std::string line = "  rank " + std::to_string(rank) + ": ";
    if (blocked) {
      hung.push_back(rank);
      line += "hung (no answer for the timeout)";
    } else if (const auto e = std::find_if(errors.begin(), errors.end(), [&](const RankError& x) { return x.rank == rank; });
               e != errors.end()) {
      line += "failed at " + seconds(run.ranks[r].end_time) + ": " + e->text;
      if (!crashed.empty()) {
        // The op's own description names its peer ("recv #1 on world from
        // rank 0 (..."): only the rest is what the library said.
        static const std::regex peer_of_the_op("(from|to) rank [0-9]+ \\(");
        const std::string said = std::regex_replace(e->text, peer_of_the_op, "(");
        bool names = false;
        for (int c : crashed)
          names = names || said.find("rank " + std::to_string(c)) != std::string::npos ||
                  said.find("Rank " + std::to_string(c)) != std::string::npos;
        line += names ? " [names the lost rank]" : " [does not name the lost rank]";
      }
    } else {
      line += "finished at " + seconds(run.ranks[r].end_time);
    }
    v.fault_report.push_back(std::move(line));
  }
  if (how.stalls_must_be_survived && crashed.empty()) {
    std::vector<int> failed;
    for (const RankError& e : errors) failed.push_back(e.rank);
    std::sort(failed.begin(), failed.end());
    failed.erase(std::unique(failed.begin(), failed.end()), failed.end());
    if (!failed.empty()) {
      Nanos longest_ms = 0;
      for (const ProcessFault& f : how.process_faults) longest_ms = std::max<Nanos>(longest_ms, f.stall_ms);
      v.failures.push_back("rank" + std::string(failed.size() > 1 ? "s " : " ") + ranks_text(failed) +
                           " failed though every stalled rank came back after at most " + std::to_string(longest_ms) +
                           " ms, well inside the op timeout: a library must wait for a slow peer up to the timeout "
                           "it was given, and every op then completes");
      if (v.outcome == "ok") v.outcome = "error";
    }
  }
  if (!hung.empty()) {
    v.failures.push_back("the library hung after the fault: rank" + std::string(hung.size() > 1 ? "s " : " ") +
                         ranks_text(hung) + " never answered (a survivor must fail with an error, or finish)\n" +
                         run.deadlock_report);
    v.outcome = "hang";
  } else {
    v.notes.push_back(crashed.empty() ? "every rank carried on past the fault"
                                      : "every survivor failed with an error or finished: the library fails loudly "
                                        "when a peer dies");
  }
}

}  // namespace

}  // namespace collie::scenario
