// collie launch as a supervisor: signals reach the ranks, its own death
// takes them with it, and a stopped rank cannot hang it.
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "backends/remote/child_processes.h"

namespace {

using collie::remote::ChildProcesses;

// Starts `collie launch -n 3` of a shell command whose ranks print
// "pid <pid>" and then run `then`; returns once all three printed.
struct Launched {
  ChildProcesses launcher;
  std::vector<pid_t> ranks;
  explicit Launched(const std::string& then)
      : launcher({{{COLLIE_BINARY, "launch", "-n", "3", "--", "sh", "-c", "echo pid $$; " + then}, {}}}) {
    while (ranks.size() < 3) {
      pollfd p{launcher.output_fds().at(0), POLLIN, 0};
      ::poll(&p, 1, 10'000);
      launcher.read_output(p.fd);
      ranks.clear();
      std::istringstream lines(launcher.output_tail(0, 1 << 20));
      for (std::string w; lines >> w;)
        if (w == "pid") {
          pid_t pid = 0;
          lines >> pid;
          ranks.push_back(pid);
        }
    }
  }
};

// Whether `pid` still runs: it exists and is not a zombie (whoever adopts
// an orphan reaps it when it likes).
bool running(pid_t pid) { return !collie::remote::process_ended(pid); }

// Whether every pid is gone, waiting up to 5 s for the kernel to finish
// killing them (a parent-death signal is delivered asynchronously).
bool all_gone(const std::vector<pid_t>& pids) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    bool any = false;
    for (pid_t p : pids) any = any || running(p);
    if (!any) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    ::poll(nullptr, 0, 10);
  }
}

// Killing collie launch (SIGTERM) left its ranks running as orphans.
TEST(Launch, SigtermIsPassedToEveryRankAndItsFateNamed) {
  Launched job("exec sleep 1000");
  job.launcher.signal(0, SIGTERM);
  job.launcher.wait_all();
  EXPECT_EQ(job.launcher.fate(0), "exited with code 143");
  const std::string out = job.launcher.output_tail(0, 1 << 20);
  EXPECT_NE(out.find("got signal 15 (Terminated); passed it to the ranks"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 2 killed by signal 15 (Terminated)"), std::string::npos) << out;
  EXPECT_TRUE(all_gone(job.ranks));
}

// ... and SIGKILL, which it cannot catch: its ranks die with it.
TEST(Launch, SigkillOfTheLauncherTakesItsRanksWithIt) {
  Launched job("exec sleep 1000");
  job.launcher.signal(0, SIGKILL);
  job.launcher.wait_all();
  EXPECT_EQ(job.launcher.fate(0), "killed by signal 9 (Killed)");
  EXPECT_TRUE(all_gone(job.ranks));
}

// A rank stopped with SIGSTOP: the others failed, but launch waited for it
// for ever. Now it is continued and terminated after the grace period.
TEST(Launch, AStoppedRankCannotHangTheLauncher) {
  Launched job("if [ $RANK = 1 ]; then kill -STOP $$; fi; if [ $RANK = 0 ]; then exit 3; fi; exec sleep 1000");
  job.launcher.wait_all();
  EXPECT_EQ(job.launcher.fate(0), "exited with code 1");
  const std::string out = job.launcher.output_tail(0, 1 << 20);
  EXPECT_NE(out.find("rank 0 failed first: exited with code 3"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1 killed by signal 15 (Terminated)"), std::string::npos) << out;
  EXPECT_TRUE(all_gone(job.ranks));
}

}  // namespace
