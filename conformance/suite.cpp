#include "conformance/suite.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include "conformance/collective_check.h"
#include "core/error.h"
#include "scenario/loader.h"
#include "scenario/runner.h"
#include "sim/prng.h"

namespace collie::conformance {

namespace {

namespace fs = std::filesystem;

std::string first_lines(const std::string& s, int n) {
  std::string out;
  int lines = 0;
  for (char c : s) {
    if (c == '\n' && ++lines >= n) break;
    out += c;
  }
  return out;
}

struct Pending {
  std::string feature, name, kind, replay;
  std::function<std::string()> run;  // returns "" on success
};

std::unique_ptr<InProcessBackend> make_backend(const BackendInfo& b, int world, std::uint64_t seed) {
  BackendOptions o;
  o.world_size = world;
  o.seed = seed;
  o.network.jitter_fraction = 0.5;
  return b.create(o);
}

std::string run_on_backend(const BackendInfo& b, int world, std::uint64_t seed,
                           const std::function<std::string(LocalWorld&, const std::string&)>& body) {
  auto backend = make_backend(b, world, seed);
  std::vector<Transport*> ts;
  for (int r = 0; r < world; ++r) ts.push_back(&backend->transport(r));
  LocalWorld w(ts, CommunicatorOptions{});
  return body(w, "backend " + b.name + ", seed " + std::to_string(seed));
}

}  // namespace

bool SuiteResult::passed() const {
  if (!load_errors.empty() || cases.empty()) return false;
  for (const auto& c : cases)
    if (!c.passed) return false;
  return true;
}

SuiteResult run_conformance(const SuiteOptions& o) {
  const BackendRegistry& reg = o.registry ? *o.registry : BackendRegistry::builtin();
  const BackendInfo* backend = reg.find(o.backend);
  if (!backend) throw Error(ErrorKind::kUsage, OpContext{}, "unknown backend '" + o.backend + "'");
  SuiteResult res;
  res.backend = o.backend;
  std::vector<Pending> pending;

  // Scenarios marked for conformance.
  std::vector<std::string> files;
  for (const auto& dir : o.scenario_dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      res.load_errors.push_back(dir + ": not a directory of scenarios");
      continue;
    }
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::shared_ptr<scenario::Scenario> s;
    try {
      s = std::make_shared<scenario::Scenario>(scenario::load_file(f));
    } catch (const scenario::ScenarioError& e) {
      res.load_errors.push_back(e.what());
      continue;
    }
    if (!s->conformance) continue;
    Pending p;
    p.feature = s->feature.empty() ? "scenarios" : s->feature;
    p.name = fs::path(f).stem().string();
    p.kind = "scenario";
    p.replay = "collie run " + f + " --backend " + o.backend;
    p.run = [s, &o, &reg] {
      scenario::RunOptions ro;
      ro.backend = o.backend;
      ro.registry = &reg;
      auto r = scenario::run_scenario(*s, ro);
      if (r.passed) return std::string();
      std::string msg;
      for (const auto& fl : r.failures) msg += fl + "\n";
      return msg;
    };
    pending.push_back(std::move(p));
  }

  // Generated property cases.
  sim::Prng prng(o.seed);
  const std::vector<CollectiveKind> kinds = {CollectiveKind::kBroadcast, CollectiveKind::kReduce,
                                             CollectiveKind::kAllReduce, CollectiveKind::kScatter,
                                             CollectiveKind::kGather,    CollectiveKind::kAllGather,
                                             CollectiveKind::kBarrier};
  for (CollectiveKind k : kinds) {
    for (int i = 0; i < o.cases_per_feature; ++i) {
      const int world = 1 + static_cast<int>(prng.below(9));
      const CollectiveCase c = random_case(k, world, prng);
      const std::uint64_t seed = prng.next() & 0xffffffffu;
      Pending p;
      p.feature = collective_name(k);
      p.name = "random_" + std::to_string(i);
      p.kind = "property";
      p.replay = "collie conformance --backend " + o.backend + " --seed " + std::to_string(o.seed) + " --filter '^" +
                 p.feature + "/" + p.name + "$'";
      p.run = [c, world, seed, backend] {
        std::string err = run_on_backend(*backend, world, seed, [&](LocalWorld& w, const std::string& ctx) {
          return run_and_check(w, {c}, ctx);
        });
        return err.empty() ? err : c.describe() + ", world " + std::to_string(world) + ": " + err;
      };
      pending.push_back(std::move(p));
    }
  }
  for (int i = 0; i < o.cases_per_feature; ++i) {
    const int world = 2 + static_cast<int>(prng.below(7));
    const std::uint64_t seed = prng.next();
    Pending p;
    p.feature = "p2p";
    p.name = "random_traffic_" + std::to_string(i);
    p.kind = "property";
    p.replay = "collie conformance --backend " + o.backend + " --seed " + std::to_string(o.seed) + " --filter '^p2p/" +
               p.name + "$'";
    p.run = [world, seed, backend] {
      return run_on_backend(*backend, world, seed, [&](LocalWorld& w, const std::string& ctx) {
        sim::Prng traffic(seed);
        return run_p2p_traffic(w, traffic, 12, ctx);
      });
    };
    pending.push_back(std::move(p));
  }
  for (int d = 0; d < kNumDTypes; ++d) {
    for (int op = 0; op < kNumReduceOps; ++op) {
      if (reduce_op_unsupported(static_cast<ReduceOp>(op), static_cast<DType>(d))) continue;
      CollectiveCase c;
      c.op = CollectiveKind::kAllReduce;
      c.dtype = static_cast<DType>(d);
      c.reduce_op = static_cast<ReduceOp>(op);
      c.count = 33;
      c.data_seed = static_cast<std::uint64_t>(d * 100 + op + 1);
      Pending p;
      p.feature = "dtypes_x_ops";
      p.name = std::string(dtype_name(c.dtype)) + "_" + std::string(reduce_op_name(c.reduce_op));
      p.kind = "property";
      p.replay = "collie conformance --backend " + o.backend + " --filter '^dtypes_x_ops/" + p.name + "$'";
      p.run = [c, backend] {
        std::string err = run_on_backend(*backend, 5, 1, [&](LocalWorld& w, const std::string& ctx) {
          return run_and_check(w, {c}, ctx);
        });
        return err.empty() ? err : c.describe() + ": " + err;
      };
      pending.push_back(std::move(p));
    }
  }

  if (!o.filter.empty()) {
    std::regex re;
    try {
      re = std::regex(o.filter);
    } catch (const std::regex_error& e) {
      throw Error(ErrorKind::kUsage, OpContext{}, "--filter '" + o.filter + "' is not a valid regular expression: " + e.what());
    }
    std::erase_if(pending, [&](const Pending& p) { return !std::regex_search(p.feature + "/" + p.name, re); });
  }
  int index = 0;
  for (Pending& p : pending) {
    if (o.progress) o.progress(index, static_cast<int>(pending.size()), p.feature + "/" + p.name);
    ++index;
    const auto t0 = std::chrono::steady_clock::now();
    std::string err;
    try {
      err = p.run();
    } catch (const std::exception& e) {
      err = std::string("the case threw: ") + e.what();
    }
    CaseResult c;
    c.feature = p.feature;
    c.name = p.name;
    c.kind = p.kind;
    c.passed = err.empty();
    c.message = first_lines(err, 12);
    c.replay = p.replay;
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    res.cases.push_back(std::move(c));
  }
  return res;
}

std::string format_matrix(const SuiteResult& r) {
  struct Row {
    int s_pass = 0, s_total = 0, p_pass = 0, p_total = 0;
  };
  std::map<std::string, Row> rows;
  for (const auto& c : r.cases) {
    Row& row = rows[c.feature];
    if (c.kind == "scenario") {
      ++row.s_total;
      row.s_pass += c.passed ? 1 : 0;
    } else {
      ++row.p_total;
      row.p_pass += c.passed ? 1 : 0;
    }
  }
  std::ostringstream os;
  os << "conformance of backend '" << r.backend << "'\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %-16s %-11s %-11s %s\n", "feature", "scenarios", "properties", "result");
  os << line;
  for (const auto& [feature, row] : rows) {
    auto frac = [](int a, int b) { return b ? std::to_string(a) + "/" + std::to_string(b) : std::string("-"); };
    const bool ok = row.s_pass == row.s_total && row.p_pass == row.p_total;
    std::snprintf(line, sizeof line, "  %-16s %-11s %-11s %s\n", feature.c_str(), frac(row.s_pass, row.s_total).c_str(),
                  frac(row.p_pass, row.p_total).c_str(), ok ? "PASS" : "FAIL");
    os << line;
  }
  int failed = 0;
  for (const auto& c : r.cases) failed += c.passed ? 0 : 1;
  if (failed) {
    os << "\nfailures (" << failed << "):\n";
    int shown = 0;
    for (const auto& c : r.cases) {
      if (c.passed) continue;
      if (++shown > 10) {
        os << "  ... and " << failed - 10 << " more (see the JUnit report)\n";
        break;
      }
      os << "  " << c.feature << "/" << c.name << ":\n";
      std::istringstream lines(c.message);
      std::string l;
      int n = 0;
      while (std::getline(lines, l) && n++ < 8) os << "      " << l << "\n";
      os << "    replay: " << c.replay << "\n";
    }
  }
  for (const auto& e : r.load_errors) os << "  scenario not loaded: " << e << "\n";
  std::snprintf(line, sizeof line, "\n%zu passed, %d failed\n", r.cases.size() - static_cast<std::size_t>(failed), failed);
  os << line;
  return os.str();
}

namespace {
std::string xml_escape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') o += "?";
        else o += static_cast<char>(c);
    }
  }
  return o;
}
}  // namespace

std::string junit_xml(const std::string& suite_name, const std::vector<CaseResult>& cases) {
  std::map<std::string, std::vector<const CaseResult*>> by_feature;
  for (const auto& c : cases) by_feature[c.feature].push_back(&c);
  int failures = 0;
  double total = 0;
  for (const auto& c : cases) {
    failures += c.passed ? 0 : 1;
    total += c.seconds;
  }
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  os << "<testsuites name=\"" << xml_escape(suite_name) << "\" tests=\"" << cases.size() << "\" failures=\""
     << failures << "\" time=\"" << total << "\">\n";
  for (const auto& [feature, cs] : by_feature) {
    int f = 0;
    double t = 0;
    for (const auto* c : cs) {
      f += c->passed ? 0 : 1;
      t += c->seconds;
    }
    os << "  <testsuite name=\"" << xml_escape(feature) << "\" tests=\"" << cs.size() << "\" failures=\"" << f
       << "\" errors=\"0\" time=\"" << t << "\">\n";
    for (const auto* c : cs) {
      os << "    <testcase classname=\"" << xml_escape(suite_name + "." + feature) << "\" name=\""
         << xml_escape(c->name) << "\" time=\"" << c->seconds << "\"";
      if (c->passed) {
        os << "/>\n";
      } else {
        const std::string first = c->message.substr(0, c->message.find('\n'));
        os << ">\n      <failure message=\"" << xml_escape(first) << "\">" << xml_escape(c->message)
           << "\nreplay: " << xml_escape(c->replay) << "</failure>\n    </testcase>\n";
      }
    }
    os << "  </testsuite>\n";
  }
  os << "</testsuites>\n";
  return os.str();
}

}  // namespace collie::conformance
