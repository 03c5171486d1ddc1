// Ranks killed at random points: for each seed, a world of 2..5 processes
// (collie launch) runs a random sequence of collectives and one rank kills
// itself (SIGKILL) at a random op, before, during or after it. Every
// survivor must fail -- not hang -- with an error naming the dead rank, and
// the launcher must name the dead rank as the one that failed first.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <random>
#include <string>

#include <gtest/gtest.h>

namespace {

struct Ran {
  int status = -1;
  std::string output;
};

Ran run(const std::string& cmd) {
  Ran r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) r.output += buf.data();
  r.status = ::pclose(p);
  return r;
}

TEST(KillTest, ARankKilledAtARandomPointFailsEverySurvivorNamingIt) {
  const char* seeds_env = std::getenv("COLLIE_KILL_SEEDS");
  const int seeds = seeds_env ? std::atoi(seeds_env) : 16;
  for (int seed = 1; seed <= seeds; ++seed) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
    const int n = 2 + static_cast<int>(rng() % 4);
    const int ops = 30;
    const int victim = static_cast<int>(rng() % static_cast<std::uint64_t>(n));
    const int at = static_cast<int>(rng() % (ops - 1));  // at least one op follows
    const char* phases[] = {"before", "during", "after"};
    const std::string phase = phases[rng() % 3];
    const std::string cmd = "COLLIE_TIMEOUT_S=20 " COLLIE_BINARY " launch -n " + std::to_string(n) + " -- " CHAOS_RANK
                            " --seed " + std::to_string(seed) + " --ops " + std::to_string(ops) + " --kill-rank " +
                            std::to_string(victim) + " --kill-op " + std::to_string(at) + " --kill-phase " + phase;
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + cmd);
    const Ran r = run(cmd);
    ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
    EXPECT_EQ(WEXITSTATUS(r.status), 1) << r.output;
    EXPECT_NE(r.output.find("rank " + std::to_string(victim) + " failed first: killed by signal 9"), std::string::npos)
        << r.output;
    for (int s = 0; s < n; ++s) {
      if (s == victim) continue;
      const std::string line = "rank " + std::to_string(s) + " failed: ";
      const auto at_line = r.output.find(line);
      ASSERT_NE(at_line, std::string::npos) << "survivor " << s << " did not fail\n" << r.output;
      const std::string text = r.output.substr(at_line, r.output.find('\n', at_line) - at_line);
      EXPECT_NE(text.find("rank " + std::to_string(victim)), std::string::npos) << text;
      EXPECT_EQ(r.output.find("rank " + std::to_string(s) + " done"), std::string::npos) << r.output;
    }
  }
}

TEST(KillTest, WithoutAKillEveryRankFinishes) {
  const Ran r = run("COLLIE_TIMEOUT_S=20 " COLLIE_BINARY " launch -n 4 -- " CHAOS_RANK " --seed 3 --ops 30");
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_EQ(WEXITSTATUS(r.status), 0) << r.output;
  for (int s = 0; s < 4; ++s) EXPECT_NE(r.output.find("rank " + std::to_string(s) + " done"), std::string::npos) << r.output;
}

}  // namespace
