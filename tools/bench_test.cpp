// collie bench's table: the rows of an nccl-tests-style run.
#include "tools/bench.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "backends/job.h"
#include "backends/registry.h"
#include "sim/simulation_options.h"

namespace collie::tools {
namespace {

// collie bench printed its whole table after the last size: a run of
// large sizes showed nothing for minutes. Each row is printed (and
// flushed) as rank 0 measures it, before the next size runs.
TEST(BenchTable, EachRowIsPrintedAsItIsMeasured) {
  BenchOptions o;
  o.sizes = {8, 64, 512};
  o.iters = 2;
  o.warmup_iters = 0;
  std::ostringstream out;
  BenchTable table(out, o, 2, "backend sim");
  JobOptions jo;
  jo.world_size = 2;
  sim::SimulationOptions simulation;
  jo.simulation = &simulation;
  auto job = start_job(BackendRegistry::builtin().require("sim"), jo, false);
  std::vector<std::string> printed;  // the table's text as each row arrives
  const RunResult r = job->run(
      [&](Dist& d) {
        return bench_rank(d, o, [&](const BenchRow& row) {
          table.row(row);
          printed.push_back(out.str());
        });
      },
      RunContext{"bench_test", "", {}, {}});
  ASSERT_TRUE(r.ok()) << r.describe();
  ASSERT_EQ(printed.size(), 3u);
  // When the row of 8 bytes came, it was printed and the next was not measured yet.
  EXPECT_NE(printed[0].find("\n             8            2 "), std::string::npos) << printed[0];
  EXPECT_EQ(printed[0].find("\n            64 "), std::string::npos) << printed[0];
  EXPECT_NE(printed[1].find("\n            64           16 "), std::string::npos) << printed[1];
  EXPECT_EQ(printed[2].find("Avg bus bandwidth"), std::string::npos) << printed[2];
  table.finish();
  EXPECT_NE(out.str().find("# Out of bounds values : 0 OK"), std::string::npos) << out.str();
}

// -n 1024 -e 64M of all_reduce on the simulator reached 21.9 GB before the
// kernel killed it: what the buffers take is known before any is allocated.
TEST(BenchMemory, TheBuffersOfTheLargestRowOnEveryRankAreCountedBeforeAnyIsAllocated) {
  BenchOptions o;
  o.min_bytes = o.max_bytes = 64ull << 20;
  // all_reduce: one tensor per rank, and one chunk (the whole) for the check.
  EXPECT_EQ(bench_memory_bytes(o, 1024), 1024.0 * 2 * (64ull << 20));
  o.op = "all_gather";  // a list of n chunks and a tensor of one chunk, and the check's chunk
  EXPECT_EQ(bench_memory_bytes(o, 4), 4.0 * (4 + 1 + 1) * (16ull << 20));
  o.op = "barrier";
  EXPECT_EQ(bench_memory_bytes(o, 1024), 0.0);
}

}  // namespace
}  // namespace collie::tools
