// What `collie run --json` reports of one run (its text: scenario/run_report.h),
// shared by scenario runs (collie.cpp) and program runs (run_script.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include "scenario/run_report.h"
#include "scenario/runner.h"

namespace collie::tools {

using scenario::hex;

// The fields every run reports: its verdict, where it ran, how to replay it,
// and on the simulator its virtual time, trace hash and events.
inline void add_run_fields(nlohmann::json& j, const scenario::ScenarioResult& r) {
  j["passed"] = r.passed;
  j["outcome"] = r.outcome;
  j["detail"] = r.detail;
  j["failures"] = r.failures;
  j["notes"] = r.notes;
  j["implementation"] = r.implementation;
  j["backend"] = r.backend;
  j["seed"] = r.seed;
  j["world"] = r.world;
  j["checks"] = r.checks;
  j["wall_seconds"] = r.wall_seconds;
  j["replay"] = r.replay;
  if (r.simulated) {
    j["virtual_time_ns"] = r.virtual_time;
    j["trace_hash"] = hex(r.trace_hash);
    j["events"] = r.events;
  }
}

// The ranks' lines, in the order they ran: rank, virtual time and text.
inline void add_output(nlohmann::json& j, const scenario::ScenarioResult& r) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& l : r.output) out.push_back({{"rank", l.rank}, {"time_ns", l.time}, {"text", l.text}});
  j["output"] = out;
}

}  // namespace collie::tools
