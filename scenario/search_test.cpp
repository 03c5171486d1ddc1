// collie explore and collie fuzz: they find the bugs they should, and
// nothing in correct programs.
#include "scenario/search.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "scenario/loader.h"

namespace collie::scenario {
namespace {

std::string path(const std::string& rel) { return std::string(COLLIE_SOURCE_DIR) + "/" + rel; }

TEST(Explore, FindsTheBugInEveryDeadlockScenario) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(path("scenarios/deadlocks"))) {
    if (e.path().extension() != ".yaml") continue;
    ++n;
    const Scenario s = load_file(e.path().string());
    ExploreOptions o;
    o.max_runs = 200;
    const ExploreResult r = explore(s, o);
    EXPECT_FALSE(r.findings.empty()) << e.path();
  }
  EXPECT_GE(n, 10);
}

TEST(Explore, FindsTheAnySourceStealOnlyInTheOtherDeliveryOrder) {
  const Scenario s = load_file(path("scenarios/deadlocks/any_source_steals_a_message.yaml"));
  ExploreOptions o;
  const ExploreResult r = explore(s, o);
  EXPECT_TRUE(r.exhausted);
  ASSERT_FALSE(r.findings.empty());
  const ExploreFinding& f = r.findings[0];
  EXPECT_EQ(f.result.outcome, "deadlock");
  ASSERT_EQ(f.schedule, std::vector<int>{1});
  EXPECT_EQ(f.choices[0], "rank 0 gets rank 2's frame (tag 0) first");
  // Replaying the schedule reproduces it; the default order does not deadlock.
  o.schedule = f.schedule;
  EXPECT_EQ(explore(s, o).findings.size(), 1u);
  o.schedule = {0};
  EXPECT_TRUE(explore(s, o).findings.empty());
}

TEST(Explore, FindsAProgramThatOnlyWorksBecauseSmallSendsAreBuffered) {
  const Scenario s = load_file(path("scenarios/p2p/head_to_head_eager.yaml"));
  const ExploreResult r = explore(s, {});
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].mode, "every send rendezvous");
  EXPECT_NE(r.findings[0].signature.find("wait-for cycle: 0 -> 1 -> 0"), std::string::npos);
}

TEST(Explore, ReportsNothingInCorrectProgramsAndSaysTheSpaceWasExhausted) {
  for (const char* f : {"scenarios/tutorial/all_reduce.yaml", "scenarios/tutorial/gather.yaml",
                        "scenarios/tutorial/ping_pong.yaml", "scenarios/p2p/any_source.yaml",
                        "scenarios/groups/overlapping_groups.yaml", "scenarios/p2p/ring_exchange.yaml"}) {
    const ExploreResult r = explore(load_file(path(f)), {});
    EXPECT_TRUE(r.findings.empty()) << f << ": " << r.findings[0].signature;
    EXPECT_TRUE(r.exhausted) << f;
  }
}

TEST(Explore, StopsAtTheBoundAndSaysSo) {
  ExploreOptions o;
  o.max_runs = 2;
  const ExploreResult r = explore(load_file(path("scenarios/p2p/any_source.yaml")), o);
  EXPECT_EQ(r.runs, 2u);
  EXPECT_FALSE(r.exhausted);
}

TEST(Explore, SingleFaultsAreTriedOnRequest) {
  ExploreOptions o;
  o.with_faults = true;
  const ExploreResult r = explore(load_file(path("scenarios/tutorial/send_recv_blocking.yaml")), o);
  bool dropped = false, crashed = false;
  for (const auto& f : r.findings) {
    dropped = dropped || f.mode == "drop the first message 0->1";
    crashed = crashed || f.mode.rfind("crash rank", 0) == 0;
  }
  EXPECT_TRUE(dropped);
  EXPECT_TRUE(crashed);
}

// The options a printed replay line gives: collie explore FILE --schedule
// S [--buffering B] [--fault F]... -v, read back word by word.
ExploreOptions options_of(const std::string& line) {
  std::istringstream words(line);
  std::vector<std::string> w;
  for (std::string x; words >> x;) w.push_back(x);
  ExploreOptions o;
  for (std::size_t k = 3; k + 1 < w.size(); ++k) {
    if (w[k] == "--schedule") {
      std::stringstream list(w[k + 1]);
      for (std::string c; std::getline(list, c, ',');) o.schedule.push_back(std::stoi(c));
    } else if (w[k] == "--buffering") {
      o.buffering = w[k + 1] == "rendezvous" ? Buffering::kRendezvous : Buffering::kEager;
    } else if (w[k] == "--fault") {
      EXPECT_FALSE(sim::parse_fault(w[k + 1], o.base.extra_faults)) << w[k + 1];
      o.base.fault_args.push_back(w[k + 1]);
    }
  }
  return o;
}

// Fault findings printed replay lines without the fault (they replayed a
// passing run), and a rendezvous finding's line dropped --buffering.
TEST(Explore, EveryFindingReplaysAsPrinted) {
  int replayed = 0;
  for (const char* f : {"scenarios/p2p/head_to_head_eager.yaml", "scenarios/tutorial/send_recv_blocking.yaml",
                        "scenarios/deadlocks/any_source_steals_a_message.yaml", "scenarios/tutorial/all_reduce.yaml"}) {
    const Scenario s = load_file(path(f));
    ExploreOptions o;
    o.with_faults = true;
    o.max_runs = 300;
    for (const ExploreFinding& finding : explore(s, o).findings) {
      const std::string line = explore_replay(s.file, finding);
      const ExploreResult again = explore(s, options_of(line));
      ASSERT_EQ(again.findings.size(), 1u) << line;
      EXPECT_EQ(again.findings[0].signature, finding.signature) << line;
      EXPECT_EQ(again.findings[0].buffering, finding.buffering) << line;
      EXPECT_EQ(again.findings[0].faults, finding.faults) << line;
      ++replayed;
    }
  }
  EXPECT_GE(replayed, 10);
}

// With --faults and a fault-free space larger than the bound, no fault was
// ever tried and the search said it found nothing.
TEST(Explore, EveryFaultIsTriedWhenTheFaultFreeSpaceExceedsTheBound) {
  ExploreOptions o;
  o.with_faults = true;
  o.max_runs = 20;
  const ExploreResult r = explore(load_file(path("scenarios/tutorial/all_reduce.yaml")), o);
  EXPECT_EQ(r.fault_placements_total, 16u);  // 4 crashes, 12 drops
  EXPECT_EQ(r.fault_placements, 16u);
  EXPECT_EQ(r.schedules + r.fault_placements, r.runs);
  EXPECT_FALSE(r.exhausted);
  EXPECT_FALSE(r.findings.empty());
}

// --schedule 9,9,9 ran the default order and said it replayed the schedule.
TEST(Explore, AScheduleTheProgramDoesNotOfferIsRefused) {
  const Scenario s = load_file(path("scenarios/deadlocks/any_source_steals_a_message.yaml"));
  ExploreOptions o;
  o.schedule = {9, 9, 9};
  EXPECT_THROW(explore(s, o), Error);
  o.schedule = {1, 0, 0, 0};  // trailing zeros are the default anyway
  EXPECT_EQ(explore(s, o).findings.size(), 1u);
  o.schedule = {1, 1};  // a second choice the run never offers
  EXPECT_THROW(explore(s, o), Error);
  o.schedule = {};
  o.max_runs = 0;
  EXPECT_THROW(explore(s, o), Error);
}

TEST(Fuzz, BenignProfilesNeverChangeACorrectProgramsResult) {
  FuzzOptions o;
  o.first_seed = 1;
  o.last_seed = 150;
  const FuzzResult r = fuzz(load_file(path("scenarios/groups/overlapping_groups.yaml")), o);
  EXPECT_EQ(r.runs, 150u);
  EXPECT_TRUE(r.failures.empty()) << r.failures[0].seed << ": " << failure_signature(r.failures[0].result);
}

TEST(Fuzz, FindsALatentRaceAndShrinksItToAScenarioThatStillFails) {
  const std::string file = path("scenario/testdata/latent_race.yaml");
  const Scenario s = load_file(file);
  ASSERT_TRUE(run_scenario(s, {}).passed);  // with the default timing it works
  FuzzOptions o;
  o.first_seed = 1;
  o.last_seed = 60;
  const FuzzResult r = fuzz(s, o);
  ASSERT_FALSE(r.failures.empty());
  const auto& first = r.failures.front();
  EXPECT_NE(first.result.replay.find("--random-faults " + std::to_string(first.seed)), std::string::npos);
  std::string summary;
  const std::string yaml = shrink(file, first.seed, false, {}, &summary);
  const Scenario small = load_text(yaml, "shrunk.yaml");
  EXPECT_LT(small.program.size(), s.program.size()) << summary;
  const ScenarioResult again = run_scenario(small, {});
  EXPECT_FALSE(again.passed);
  EXPECT_EQ(failure_signature(again), failure_signature(first.result)) << summary << yaml;
}

}  // namespace
}  // namespace collie::scenario
