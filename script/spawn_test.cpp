// multiprocessing's "spawn" children under collie run (script/python/
// collie_script/_spawn.py forks them instead of starting a Python that
// imports torch again): what the program sees must be what a spawned
// child sees. Skipped, with the reason, where there is no torch.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "backends/torch/torch_backend.h"
#include "script/script_run.h"

namespace collie::script {
namespace {

const std::string kData = COLLIE_SCRIPT_TESTDATA;

// 1-based number of the first line of `file` holding `code`, or 0.
int line_of(const std::string& file, const std::string& code) {
  std::ifstream f(file);
  std::string l;
  for (int n = 1; std::getline(f, l); ++n)
    if (l.find(code) != std::string::npos) return n;
  return 0;
}

TEST(Spawn, ChildrenSeeTheirParentsEnvironmentImportMainAgainDrawTheirOwnSeedAndReportTheirOwnFrames) {
  if (const std::string why = torch::missing(); !why.empty()) GTEST_SKIP() << "no torch here: " << why;
  const std::string py = torch::python();
  ScriptOptions o;
  o.command = {py, kData + "/spawned.py"};
  o.join_timeout_ns = 600'000'000'000;  // torch's import, on a loaded machine
  const ScriptResult r = run_script(o);
  std::string out, report;
  for (const auto& l : r.run.output) out += l.text + "\n";
  for (const auto& f : r.run.failures) report += f + "\n";
  for (const auto& f : r.program) report += f + "\n";

  EXPECT_FALSE(r.run.passed);
  EXPECT_NE(r.run.outcome.find("deadlock"), std::string::npos) << r.run.outcome << "\n" << report;
  // Each child draws its own seed, as a fresh process does (a forked one
  // would have its parent's generator).
  std::smatch m;
  std::vector<std::string> seeds;
  for (const std::string who : {"rank 0: __mp_main__ set-before-start", "rank 1: __mp_main__ set-before-start"}) {
    ASSERT_TRUE(std::regex_search(out, m, std::regex(who + " seed ([0-9]+)\n"))) << who << " not printed:\n" << out;
    seeds.push_back(m[1].str());
  }
  EXPECT_NE(seeds[0], seeds[1]);
  // The child's stack starts at its process: its own recv, not the
  // parent's start() below it.
  const std::string file = kData + "/spawned.py";
  EXPECT_NE(report.find("spawned.py:" + std::to_string(line_of(file, "dist.recv(torch.zeros(1), src=0)"))),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("spawned.py:" + std::to_string(line_of(file, "c.start()"))), std::string::npos) << report;
}

}  // namespace
}  // namespace collie::script
