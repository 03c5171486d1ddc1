// What `collie run` reports of one run as JSON and in its summary line,
// shared by scenario runs (collie.cpp) and program runs (run_script.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "scenario/runner.h"

namespace collie::tools {

// A trace hash as printed: 16 hex digits.
inline std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// The fields every run reports: where it ran, how to replay it, and on the
// simulator its virtual time, trace hash and events.
inline void add_run_fields(nlohmann::json& j, const scenario::ScenarioResult& r) {
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

}  // namespace collie::tools
