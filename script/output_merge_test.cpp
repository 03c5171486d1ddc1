// The merged output's order: (virtual time, rank, order written), printed
// only once no rank can still precede a line.
#include "script/output_merge.h"

#include <gtest/gtest.h>

#include <sstream>

namespace collie::script {
namespace {

std::vector<std::string> texts(const OutputMerge& m) {
  std::vector<std::string> out;
  for (const auto& l : m.lines()) out.push_back(l.text);
  return out;
}

TEST(OutputMerge, ALineWaitsWhileAComputingRankCouldStillWriteBeforeIt) {
  std::ostringstream os;
  OutputMerge m(OutputOptions{&os, false});
  Nanos now = 0;
  m.set_clock([&] { return now; });
  m.set_world(2);
  m.set_stamp(0, 100);
  m.add(0, 100, "rank 0 at 100");
  m.flush_ready();
  // Rank 1 computes at its stamp 0: it may still write a line at 0.
  EXPECT_TRUE(m.lines().empty());
  m.add(1, 0, "rank 1 at 0");
  m.set_stamp(1, 50);
  m.flush_ready();
  EXPECT_EQ(texts(m), (std::vector<std::string>{"rank 1 at 0"}));
  m.set_stamp(1, 100);  // ties go to the lower rank
  m.flush_ready();
  EXPECT_EQ(texts(m), (std::vector<std::string>{"rank 1 at 0", "rank 0 at 100"}));
  EXPECT_EQ(os.str(), "rank 1 at 0\nrank 0 at 100\n");
}

TEST(OutputMerge, ABlockedRankCannotWriteBeforeTheClock) {
  OutputMerge m(OutputOptions{nullptr, false});
  Nanos now = 0;
  m.set_clock([&] { return now; });
  m.set_world(2);
  m.add(0, 10, "rank 0 at 10");
  m.set_blocked(1, true);
  m.flush_ready();
  EXPECT_TRUE(m.lines().empty());  // rank 1 blocked at 0 may be answered at 0..10
  now = 11;
  m.flush_ready();
  EXPECT_EQ(texts(m), (std::vector<std::string>{"rank 0 at 10"}));
}

TEST(OutputMerge, ADoneRankHoldsNothingBackAndFlushAllSortsTheRest) {
  OutputMerge m(OutputOptions{nullptr, false});
  m.set_world(3);
  m.add(2, 5, "c");
  m.add(1, 5, "b");
  m.add(1, 5, "b2");
  m.add(0, 7, "d");
  m.set_done(0);
  m.flush_ready();
  EXPECT_TRUE(m.lines().empty());  // ranks 1 and 2 still compute at stamp 0
  m.flush_all();
  EXPECT_EQ(texts(m), (std::vector<std::string>{"b", "b2", "c", "d"}));
}

TEST(OutputMerge, VerboseLinesCarryRankAndTime) {
  std::ostringstream os;
  OutputMerge m(OutputOptions{&os, true});
  m.set_world(1);
  m.add(0, 529, "hello");
  m.add_other("process 12", "launcher says hi");
  m.flush_all();
  EXPECT_EQ(os.str(), "[process 12] launcher says hi\n[rank 0 @ 529 ns] hello\n");
}

}  // namespace
}  // namespace collie::script
