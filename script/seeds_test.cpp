// The tutorials' programs (../shared/seeds/), run as their authors run them
// under `collie run -- python FILE.py`: each program is made of the seed's
// own code blocks, verbatim, and must pass and print the lines the seed
// shows it printing. The tutorials' deliberately wrong variants -- one line
// of a program taken out -- must be diagnosed naming the line.
//
// A seed's complete programs are the blocks that start their processes
// (`if __name__ == "__main__":`). Three ways of completing them, each the
// tutorial's own:
//   - a program that passes a function another block of its seed defines
//     (000's send_receive.py, "Options: run_non_blocking, ...") gets that
//     block in front of it;
//   - a function block that replaces the template's `run` ("replace run
//     function above") goes just before the template's
//     `if __name__ == "__main__":` line;
//   - a program that reads RANK and WORLD_SIZE from its environment runs
//     as torchrun would start it (-n 2), one that spawns its own
//     processes runs once.
// 001's template is an elided fragment (`...`, and `continue` outside a
// loop): it has no complete program, so nothing of it runs here.
//
// Skipped, with the reason, where the seeds or torch are missing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include "backends/torch/torch_backend.h"
#include "script/script_run.h"

namespace collie::script {
namespace {

std::string seeds_dir() {
  if (const char* d = std::getenv("COLLIE_SEEDS_DIR"); d && *d) return d;
  return COLLIE_SEEDS_DIR;
}

std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

// The seed file whose name starts with `prefix` ("004_"), or empty.
std::string seed_text(const std::string& prefix) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(seeds_dir(), ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return read(e.path().string());
  return {};
}

// The seed's ```python blocks, verbatim.
std::vector<std::string> python_blocks(const std::string& text) {
  std::vector<std::string> out;
  static const std::regex fence("```python\n([\\s\\S]*?)```");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), fence); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str());
  return out;
}

// The block whose first line is `first_line`.
std::string block(const std::vector<std::string>& blocks, const std::string& first_line) {
  for (const auto& b : blocks)
    if (b.substr(0, b.find('\n')) == first_line) return b;
  ADD_FAILURE() << "no block starts with " << first_line;
  return {};
}

constexpr const char* kMainGuard = "if __name__ == \"__main__\":";

// `function` placed just before the template's main guard.
std::string with_run(const std::string& templ, const std::string& function) {
  const auto at = templ.find(kMainGuard);
  EXPECT_NE(at, std::string::npos);
  return templ.substr(0, at) + function + "\n" + templ.substr(at);
}

// 1-based number of the line of `text` that holds `code`, or 0.
int line_of(const std::string& text, const std::string& code) {
  std::istringstream is(text);
  std::string l;
  for (int n = 1; std::getline(is, l); ++n)
    if (l.find(code) != std::string::npos) return n;
  return 0;
}

struct SeedProgram {
  std::string name;                  // the test's name, and the file's
  std::string seed;                  // "004_"
  std::function<std::string(const std::vector<std::string>&)> make;  // from the seed's blocks
  int nprocs = 0;
  std::vector<std::string> shows;    // lines the seed shows it printing (each in the seed's text)
  // A deliberately wrong variant: the report it must give, and the code
  // lines it must name ("FILE:LINE:  code" in the report).
  std::vector<std::string> fails_with;
  std::vector<std::string> names_lines;
  // Run it again with the same seed: the same lines, stamps, order, trace
  // and verdict (what the seeds print in a stable order).
  bool twice = false;
};

void PrintTo(const SeedProgram& p, std::ostream* os) { *os << p.name; }

const std::string kSendRecvMain = "\"\"\"send_receive.py\"\"\"";
const std::string kRunPy = "\"\"\"run.py:\"\"\"";
const std::string kMainPy = "#!/usr/bin/env python";
const std::string kPingPong = "import os";

using Make = std::function<std::string(const std::vector<std::string>&)>;

// A program that must pass.
SeedProgram ok(std::string name, std::string seed, Make make, int nprocs, std::vector<std::string> shows) {
  SeedProgram p;
  p.name = std::move(name);
  p.seed = std::move(seed);
  p.make = std::move(make);
  p.nprocs = nprocs;
  p.shows = std::move(shows);
  return p;
}

std::vector<SeedProgram> programs() {
  std::vector<SeedProgram> p;
  p.push_back(ok("send_receive_non_blocking", "000_",
               [](const auto& b) {
                 return block(b, "\"\"\"Blocking point-to-point communication.\"\"\"") +
                        block(b, "\"\"\"Non-blocking point-to-point communication.\"\"\"") + block(b, kSendRecvMain);
               },
               0,
               {"Rank 0 started sending", "Rank 1 started receiving", "Rank  0  has data  tensor(1.)",
                "Rank  1  has data  tensor(1.)"}));
  p.back().twice = true;
  p.push_back(ok("run_template", "002_", [](const auto& b) { return block(b, kRunPy); }, 0, {}));
  for (const auto& [name, first] : std::vector<std::pair<std::string, std::string>>{
           {"run_blocking", "\"\"\"Blocking point-to-point communication.\"\"\""},
           {"run_non_blocking", "\"\"\"Non-blocking point-to-point communication.\"\"\""},
           {"run_all_reduce", "\"\"\" All-Reduce example.\"\"\""}})
    p.push_back(ok(name, "002_", [first = first](const auto& b) { return with_run(block(b, kRunPy), block(b, first)); },
                 0, {}));
  p.push_back(ok("main_py_torchrun", "003_", [](const auto& b) { return block(b, kMainPy); }, 2,
               {"MASTER_ADDR:  127.0.0.1", "MASTER_PORT:  29500", "Starting init process group. Current rank:  0",
                "Starting init process group. Current rank:  1", "Finished init process group. Current rank:  0",
                "Finished init process group. Current rank:  1", "Running function. Current rank:  0",
                "Running function. Current rank:  1"}));
  p.push_back(ok("main_py_point_to_point", "003_",
               [](const auto& b) { return with_run(block(b, kMainPy), block(b, "# replace run function above")); }, 2,
               {}));
  p.push_back(ok("main_py_all_reduce", "003_",
               [](const auto& b) { return with_run(block(b, kMainPy), block(b, "\"\"\" All-Reduce example.\"\"\"")); },
               2, {}));
  p.push_back(ok("ping_pong", "004_", [](const auto& b) { return block(b, kPingPong); }, 0, {}));

  // The deliberately wrong variants.
  SeedProgram no_reply = ok("ping_pong_without_the_reply", "004_",
                       [](const auto& b) {
                         std::string t = block(b, kPingPong);
                         const std::string reply = "    tensor += 1\n    dist.send(tensor=tensor, dst=0)\n";
                         const auto at = t.find(reply);
                         EXPECT_NE(at, std::string::npos);
                         return t.replace(at, reply.size(), "    tensor += 1\n");
                       },
                       0, {});
  no_reply.fails_with = {"deadlock", "rank 1 finished without sending what rank 0 waits for in recv #2 on world"};
  no_reply.names_lines = {"dist.recv(tensor=tensor, src=1)"};
  p.push_back(no_reply);
  SeedProgram skips_receive = ok("run_blocking_where_rank_1_skips_its_receive", "002_",
                            [](const auto& b) {
                              std::string run = block(b, "\"\"\"Blocking point-to-point communication.\"\"\"");
                              const std::string recv = "        dist.recv(tensor=tensor, src=0)\n";
                              const auto at = run.find(recv);
                              EXPECT_NE(at, std::string::npos);
                              run.replace(at, recv.size(), "        pass\n");
                              return with_run(block(b, kRunPy), run);
                            },
                            0, {});
  skips_receive.fails_with = {"rank 0's send(dst=1, float32 x 1) on world was never received"};
  skips_receive.names_lines = {"dist.send(tensor=tensor, dst=1)"};
  p.push_back(skips_receive);
  return p;
}

class Seeds : public ::testing::TestWithParam<SeedProgram> {};

TEST_P(Seeds, RunsVerbatimAndPrintsWhatTheSeedShows) {
  const SeedProgram& p = GetParam();
  const std::string seed = seed_text(p.seed);
  if (seed.empty()) GTEST_SKIP() << "no seed " << p.seed << "* in " << seeds_dir() << " (set COLLIE_SEEDS_DIR)";
  if (const std::string why = torch::missing(); !why.empty()) GTEST_SKIP() << "no torch here: " << why;
  const std::string text = p.make(python_blocks(seed));
  ASSERT_FALSE(text.empty());
  const std::string file = ::testing::TempDir() + "/seed_" + p.seed + p.name + ".py";
  std::ofstream(file, std::ios::binary) << text;

  ScriptOptions o;
  o.command = {torch::python(), file};
  o.nprocs = p.nprocs;
  const ScriptResult r = run_script(o);
  std::string out, report;
  for (const auto& l : r.run.output) out += l.text + "\n";
  for (const auto& f : r.run.failures) report += f + "\n";
  for (const auto& f : r.program) report += f + "\n";
  std::cout << p.name << ": " << (r.run.passed ? "PASS" : "FAIL") << " (" << r.run.outcome << ") in "
            << r.run.wall_seconds << " s of wall time\n";

  if (p.twice) {
    const ScriptResult again = run_script(o);
    EXPECT_EQ(again.run.outcome, r.run.outcome);
    EXPECT_EQ(again.run.trace_hash, r.run.trace_hash);
    ASSERT_EQ(again.run.output.size(), r.run.output.size());
    for (std::size_t i = 0; i < r.run.output.size(); ++i) {
      EXPECT_EQ(again.run.output[i].rank, r.run.output[i].rank) << i;
      EXPECT_EQ(again.run.output[i].time, r.run.output[i].time) << i;
      EXPECT_EQ(again.run.output[i].text, r.run.output[i].text) << i;
    }
  }
  for (const auto& line : p.shows) {
    EXPECT_NE(seed.find(line), std::string::npos) << "the seed does not show '" << line << "'";
    EXPECT_NE(out.find(line + "\n"), std::string::npos) << "'" << line << "' not printed; the output:\n" << out;
  }
  if (p.fails_with.empty()) {
    EXPECT_TRUE(r.run.passed) << report << out;
    return;
  }
  EXPECT_FALSE(r.run.passed);
  for (const auto& want : p.fails_with)
    EXPECT_NE((r.run.outcome + "\n" + report).find(want), std::string::npos) << "no '" << want << "' in\n" << report;
  for (const auto& code : p.names_lines) {
    const int n = line_of(text, code);
    ASSERT_GT(n, 0) << code;
    const std::string where = std::filesystem::path(file).filename().string() + ":" + std::to_string(n);
    EXPECT_NE(report.find(where), std::string::npos) << "the report does not name " << where << "\n" << report;
    EXPECT_NE(report.find(code), std::string::npos) << report;
  }
}

INSTANTIATE_TEST_SUITE_P(Tutorials, Seeds, ::testing::ValuesIn(programs()),
                         [](const ::testing::TestParamInfo<SeedProgram>& i) { return i.param.name; });

}  // namespace
}  // namespace collie::script
