// Lanes: every case runs once, side by side, breaking cases beside the rest.
#include "conformance/lanes.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

namespace collie::conformance {
namespace {

std::vector<LaneCase> cases(int n, int breaking) {
  std::vector<LaneCase> c;
  for (int i = 0; i < n; ++i) c.push_back({static_cast<std::size_t>(i), i < breaking});
  return c;
}

TEST(Lanes, EveryCaseRunsOnceAndEachLaneEndsOnItsOwnThread) {
  for (int lanes : {1, 3}) {
    std::mutex mu;
    std::map<std::size_t, int> ran;
    std::map<std::thread::id, int> ended;
    run_in_lanes(
        cases(40, 7), lanes,
        [&](std::size_t i) {
          std::lock_guard<std::mutex> lock(mu);
          ++ran[i];
          return true;
        },
        [&] {
          std::lock_guard<std::mutex> lock(mu);
          ++ended[std::this_thread::get_id()];
        });
    ASSERT_EQ(ran.size(), 40u) << lanes << " lanes";
    for (const auto& [i, n] : ran) EXPECT_EQ(n, 1) << "case " << i;
    EXPECT_EQ(ended.size(), static_cast<std::size_t>(lanes));
    for (const auto& [thread, n] : ended) EXPECT_EQ(n, 1);
  }
}

// A breaking case that waits (a hang window) does not hold up the rest: here
// it waits for the last of the other cases, which runs beside it.
TEST(Lanes, ABreakingCaseWaitsBesideTheRest) {
  std::mutex mu;
  std::condition_variable cv;
  bool last_ran = false;
  bool waited = false;
  run_in_lanes(
      cases(10, 1), 2,
      [&](std::size_t i) {
        std::unique_lock<std::mutex> lock(mu);
        if (i == 0) {
          waited = cv.wait_for(lock, std::chrono::seconds(30), [&] { return last_ran; });
        } else if (i == 9) {
          last_ran = true;
          cv.notify_all();
        }
        return true;
      },
      [] {});
  EXPECT_TRUE(waited);
}

TEST(Lanes, ACaseThatSaysStopEndsTheLanesAndAThrowIsRethrown) {
  int ran = 0;
  run_in_lanes(cases(10, 0), 1, [&](std::size_t i) { return ++ran, i < 3; }, [] {});
  EXPECT_EQ(ran, 4);
  EXPECT_THROW(run_in_lanes(
                   cases(10, 2), 3, [](std::size_t i) -> bool { throw std::runtime_error("case " + std::to_string(i)); },
                   [] {}),
               std::runtime_error);
}

}  // namespace
}  // namespace collie::conformance
