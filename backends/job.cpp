#include "backends/job.h"

#include "core/error.h"

#include <charconv>
#include <map>
#include <sstream>

namespace collie {

namespace {

// A whole decimal number, nothing else ("3", not "3x" or "-1").
std::optional<std::uint64_t> number(const std::string& s) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::string> parse_process_fault(const std::string& text, ProcessFault& out) {
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  if (kind != "crash" && kind != "stall")
    return "'" + text + "': a backend whose ranks are processes injects crash:rank=R,op=K (SIGKILL before the rank's "
           "op K) and stall:rank=R,op=K,ms=T (SIGSTOP there, SIGCONT T ms later)";
  std::map<std::string, std::string> kv;
  std::stringstream ss(colon == std::string::npos ? "" : text.substr(colon + 1));
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) return "'" + text + "': '" + item + "' is not key=value";
    kv[item.substr(0, eq)] = item.substr(eq + 1);
  }
  ProcessFault f;
  f.text = text;
  f.kind = kind == "crash" ? ProcessFault::Kind::kCrash : ProcessFault::Kind::kStall;
  for (const auto& [k, v] : kv) {
    const auto n = number(v);
    if (!n) return "'" + text + "': " + k + " must be a whole number >= 0, not '" + v + "'";
    if (k == "rank" && *n < (1u << 20)) f.rank = static_cast<int>(*n);
    else if (k == "op" && *n >= 1) f.before_op = *n;
    else if (k == "ms" && f.kind == ProcessFault::Kind::kStall && *n <= 86'400'000) f.stall_ms = static_cast<std::int64_t>(*n);
    else if (k == "rank" || k == "op" || k == "ms") return "'" + text + "': " + k + "=" + v + " is out of range";
    else return "'" + text + "': unknown key '" + k + "' (" + kind + " takes rank, op" + (kind == "stall" ? ", ms" : "") + ")";
  }
  if (!kv.count("rank") || !kv.count("op")) return "'" + text + "': " + kind + " needs rank= and op=";
  if (f.kind == ProcessFault::Kind::kStall && !kv.count("ms")) return "'" + text + "': stall needs ms=";
  out = f;
  return std::nullopt;
}

std::string Job::bench_in_ranks(const std::string& options_json) {
  (void)options_json;
  throw Error(ErrorKind::kUsage, OpContext{}, "this job runs its ranks in this process; bench them here");
}

}  // namespace collie
