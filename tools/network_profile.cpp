#include "tools/network_profile.h"

#include <yaml-cpp/yaml.h>

namespace collie::tools {

std::string network_profile_yaml(const sim::NetworkModel& m,
                                 const std::vector<std::pair<std::uint64_t, double>>& exchange_us,
                                 const std::string& backend, const std::string& measured_on) {
  YAML::Emitter y;
  y << YAML::Comment("collie network profile, measured by `collie calibrate --backend " + backend + "`") << YAML::Newline
    << YAML::Comment("on " + measured_on + ". Scenarios use it with") << YAML::Newline
    << YAML::Comment("network: {profile: FILE}; collie run --profile FILE; collie bench --backend sim --profile FILE.");
  y << YAML::BeginMap << YAML::Key << "version" << YAML::Value << 1 << YAML::Key << "backend" << YAML::Value << backend;
  y << YAML::Key << "measured" << YAML::Value << YAML::BeginMap
    << YAML::Comment("time of one exchange between 2 ranks (each sends to the other), microseconds")
    << YAML::Key << "exchange_us" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& [bytes, us] : exchange_us) y << YAML::Key << bytes << YAML::Value << us;
  y << YAML::EndMap << YAML::EndMap;
  auto link = [&](const char* key, const sim::LinkModel& l) {
    y << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "alpha_us" << YAML::Value
      << l.alpha_us << YAML::Key << "bandwidth_GBps" << YAML::Value << l.bandwidth_GBps << YAML::EndMap;
  };
  y << YAML::Key << "network" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "ranks_per_node" << YAML::Value << 0 << YAML::Key << "cpu_bound" << YAML::Value << true
    << YAML::Key << "cores_per_node" << YAML::Value << m.cores_per_node << YAML::Key << "overhead_us" << YAML::Value
    << m.overhead_us << YAML::Key << "oversubscribed_cpu_factor" << YAML::Value << m.oversubscribed_cpu_factor;
  link("intra", m.intra);
  link("inter", m.inter);
  y << YAML::Key << "reduce_GBps" << YAML::Value << m.reduce_GBps << YAML::Key << "cache_bytes" << YAML::Value
    << m.cache_bytes << YAML::Key << "memory_bandwidth_GBps" << YAML::Value << m.memory_bandwidth_GBps << YAML::Key
    << "memory_reduce_GBps" << YAML::Value << m.memory_reduce_GBps << YAML::Key << "eager_threshold_bytes"
    << YAML::Value << m.eager_threshold_bytes << YAML::Key << "jitter" << YAML::Value << 0;
  y << YAML::EndMap << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

}  // namespace collie::tools
