#include "tools/network_profile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "scenario/loader.h"

namespace collie::tools {
namespace {

// The profile was written by hand with ostream <<: what calibrate writes must
// be what the loader reads, value for value.
TEST(NetworkProfile, WhatCalibrateWritesLoadsBackUnchanged) {
  sim::NetworkModel m;
  m.cores_per_node = 2;
  m.overhead_us = 1.25;
  m.oversubscribed_cpu_factor = 1.19;
  m.intra = {3.5, 4.75};
  m.inter = {3.5, 4.75};
  m.reduce_GBps = 6.5;
  m.cache_bytes = 1 << 21;
  m.memory_bandwidth_GBps = 2.25;
  m.eager_threshold_bytes = 65536;
  const std::string yaml = network_profile_yaml(m, {{8, 7.5}, {1 << 20, 250.125}}, "tcp", "host \"x\": now");
  const std::string path = ::testing::TempDir() + "/profile.yaml";
  std::ofstream(path) << yaml;
  const sim::NetworkModel back = scenario::load_profile(path);
  EXPECT_EQ(back.cores_per_node, 2);
  EXPECT_DOUBLE_EQ(back.overhead_us, 1.25);
  EXPECT_DOUBLE_EQ(back.oversubscribed_cpu_factor, 1.19);
  EXPECT_DOUBLE_EQ(back.intra.alpha_us, 3.5);
  EXPECT_DOUBLE_EQ(back.intra.bandwidth_GBps, 4.75);
  EXPECT_DOUBLE_EQ(back.reduce_GBps, 6.5);
  EXPECT_EQ(back.cache_bytes, std::size_t{1} << 21);
  EXPECT_DOUBLE_EQ(back.memory_bandwidth_GBps, 2.25);
  EXPECT_TRUE(back.cpu_bound);
  EXPECT_NE(yaml.find("# collie network profile"), std::string::npos) << yaml;
}

}  // namespace
}  // namespace collie::tools
