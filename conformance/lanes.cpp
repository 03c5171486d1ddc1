#include "conformance/lanes.h"

#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

namespace collie::conformance {

void run_in_lanes(const std::vector<LaneCase>& cases, int lanes, const std::function<bool(std::size_t)>& run,
                  const std::function<void()>& end_lane) {
  if (lanes <= 1) {
    for (const LaneCase& c : cases)
      if (!run(c.index)) break;
    end_lane();
    return;
  }
  std::mutex mu;
  std::deque<std::size_t> breaking, rest;
  for (const LaneCase& c : cases) (c.breaks ? breaking : rest).push_back(c.index);
  bool stop = false;
  std::exception_ptr error;  // the first a lane threw: rethrown here
  auto next = [&](int lane) -> std::optional<std::size_t> {
    std::lock_guard<std::mutex> lock(mu);
    if (stop) return std::nullopt;
    std::deque<std::size_t>* from = lane > 0 && !breaking.empty() ? &breaking : !rest.empty() ? &rest : &breaking;
    if (from->empty()) return std::nullopt;
    const std::size_t i = from->front();
    from->pop_front();
    return i;
  };
  auto lane_loop = [&](int lane) {
    try {
      while (const auto i = next(lane))
        if (!run(*i)) {
          std::lock_guard<std::mutex> lock(mu);
          stop = true;
        }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
      stop = true;
    }
    end_lane();
  };
  std::vector<std::thread> threads;
  for (int lane = 0; lane < lanes; ++lane) threads.emplace_back(lane_loop, lane);
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace collie::conformance
