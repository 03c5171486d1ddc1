#include "core/transport_call.h"

#include <algorithm>
#include <utility>

namespace collie {

namespace {
thread_local const char* g_call = nullptr;
// Resumptions inside a call, per executor, not yet taken by its engine.
// One is enough to fail a run; a transport that does it on every call
// must not grow this without bound.
constexpr std::size_t kMaxNoted = 64;
thread_local std::vector<std::pair<const Executor*, std::string>> g_noted;
}  // namespace

TransportCall::TransportCall(const char* what) noexcept : prev_(g_call) { g_call = what; }
TransportCall::~TransportCall() { g_call = prev_; }
const char* TransportCall::current() noexcept { return g_call; }

std::string note_resumed_inside_call(const Executor* executor, const std::string& awaiting) {
  std::string report = std::string("it resumed a coroutine inside ") + (g_call ? g_call : "a call") + " (awaiting " +
                       (awaiting.empty() ? std::string("an op") : awaiting) +
                       "): resumptions come later, from inside run_until(), never inside a call the core made";
  if (g_noted.size() < kMaxNoted) g_noted.emplace_back(executor, report);
  return report;
}

bool resumptions_inside_calls_noted() noexcept { return !g_noted.empty(); }

std::vector<std::string> take_resumptions_inside_calls(const Executor* executor) {
  std::vector<std::string> out;
  if (g_noted.empty()) return out;
  for (auto& [e, text] : g_noted)
    if (e == executor) out.push_back(std::move(text));
  std::erase_if(g_noted, [executor](const auto& n) { return n.first == executor; });
  return out;
}

}  // namespace collie
