// The suite over transport plugins, and its JUnit report.
#include "conformance/suite.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/error.h"

namespace collie::conformance {
namespace {

std::string scenario_path(const std::string& rel) { return std::string(COLLIE_SOURCE_DIR) + "/scenarios/" + rel; }

TEST(Plugins, TheCorrectPluginPassesAndTheLossyOneFailsConformance) {
  BackendRegistry reg;
  EXPECT_EQ(reg.load_plugin(std::string(COLLIE_PLUGIN_DIR) + "/loopback.so"), "loopback");
  EXPECT_EQ(reg.load_plugin(std::string(COLLIE_PLUGIN_DIR) + "/lossy_loopback.so"), "lossy_loopback");
  EXPECT_THROW(reg.load_plugin(std::string(COLLIE_PLUGIN_DIR) + "/loopback.so"), Error);  // the name is taken
  EXPECT_THROW(reg.load_plugin("/nonexistent/plugin.so"), Error);
  SuiteOptions o;
  o.registry = &reg;
  o.scenario_dirs = {scenario_path("")};
  o.cases_per_feature = 10;
  o.backend = "loopback";
  const auto good = run_conformance(o);
  EXPECT_TRUE(good.passed()) << format_matrix(good);
  o.backend = "lossy_loopback";
  const auto bad = run_conformance(o);
  EXPECT_FALSE(bad.passed());
  const std::string m = format_matrix(bad);
  EXPECT_NE(m.find("FAIL"), std::string::npos);
  EXPECT_NE(m.find("deadlock"), std::string::npos) << m;
  EXPECT_NE(m.find("replay: collie"), std::string::npos) << m;
}

TEST(Conformance, JUnitReportCountsEveryCaseAndEscapes) {
  std::vector<CaseResult> cs(2);
  cs[0] = {"p2p", "a<b", "scenario", true, "", "r", 0.5, false, "", {}};
  cs[1] = {"p2p", "c", "property", false, "x & \"y\"\nmore", "collie run c", 0.25, false, "", {}};
  const std::string x = junit_xml("s", cs);
  EXPECT_NE(x.find("<testsuites name=\"s\" tests=\"2\" failures=\"1\""), std::string::npos) << x;
  EXPECT_NE(x.find("name=\"a&lt;b\""), std::string::npos);
  EXPECT_NE(x.find("<failure message=\"x &amp; &quot;y&quot;\">"), std::string::npos) << x;
}

// The replay line appeared twice when the message already ended with it (a
// deadlock report), and times were written as 1.2e-05.
TEST(Conformance, JUnitHasTheReplayLineOnceAndPlainDecimalTimes) {
  std::vector<CaseResult> cs(1);
  cs[0] = {"p2p", "c", "scenario", false, "deadlock: ...\nreplay: collie run c.yaml", "collie run c.yaml", 1.2e-05,
           false, "", {}};
  const std::string x = junit_xml("s", cs);
  EXPECT_EQ(x.find("replay: collie run c.yaml"), x.rfind("replay: collie run c.yaml")) << x;
  EXPECT_NE(x.find("time=\"0.000012\""), std::string::npos) << x;
  EXPECT_EQ(x.find("e-05"), std::string::npos) << x;
}

// A scenario that failed to load was printed after the matrix but was in
// neither the count nor the JUnit report: CI that reads only the report
// saw a suite that passed.
TEST(Conformance, AScenarioThatFailsToLoadIsAFailedCaseInTheCountAndTheJUnitReport) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "collie_suite_unloadable";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "broken.yaml") << "version: 1\nname: x\nworld: 2\nprogram:\n  - {op: allreduce}\n";
  SuiteOptions o;
  o.scenario_dirs = {dir.string(), (dir / "missing").string()};
  o.filter = "^scenario_files/";
  const SuiteResult r = run_conformance(o);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.cases.size(), 2u) << format_matrix(r);
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.failed(), 2);
  EXPECT_EQ(r.cases[0].name, "missing");
  EXPECT_NE(r.cases[0].message.find("not a directory of scenarios"), std::string::npos);
  EXPECT_EQ(r.cases[1].name, "broken");
  EXPECT_NE(r.cases[1].message.find("broken.yaml:5:10: error: unknown op 'allreduce'"), std::string::npos)
      << r.cases[1].message;
  EXPECT_EQ(r.cases[1].replay, "collie validate " + (dir / "broken.yaml").string());
  const std::string m = format_matrix(r);
  EXPECT_NE(m.find("0 passed, 2 failed"), std::string::npos) << m;
  const std::string x = junit_xml("s", r.cases);
  EXPECT_NE(x.find("tests=\"2\" failures=\"2\""), std::string::npos) << x;
  EXPECT_NE(x.find("name=\"broken\""), std::string::npos) << x;
}

}  // namespace
}  // namespace collie::conformance
