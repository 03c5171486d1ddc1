// Helpers for tests that run rank programs on the simulator.
#pragma once

#include <exception>
#include <string>

#include "core/error.h"
#include "sim/sim_world.h"

namespace collie::sim::testing {

// The text of rank r's error, or "" when it finished cleanly.
inline std::string error_text(const SimResult& res, int r) {
  const auto& o = res.ranks.at(static_cast<std::size_t>(r));
  if (!o.error) return "";
  try {
    std::rethrow_exception(o.error);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "non-standard exception";
}

// The kind of rank r's collie::Error; throws if it has none.
inline ErrorKind error_kind(const SimResult& res, int r) {
  const auto& o = res.ranks.at(static_cast<std::size_t>(r));
  if (!o.error) throw std::logic_error("rank " + std::to_string(r) + " finished without an error");
  try {
    std::rethrow_exception(o.error);
  } catch (const Error& e) {
    return e.kind();
  }
  throw std::logic_error("rank " + std::to_string(r) + " has no collie::Error");
}

}  // namespace collie::sim::testing
