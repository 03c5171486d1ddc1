// `collie calibrate`: measure a real backend's costs and write the
// simulator's network profile; with --validate, compare the simulator's
// predictions on that profile with measured times.
//
//   overhead  CPU time per message: a stream of 8-byte broadcasts, 2 ranks;
//   alpha     what an 8-byte exchange between 2 ranks (each sends to the
//             other at once, as every ring step does) leaves after that;
//   beta      bandwidth: 1 / slope of a least-squares line through the
//             exchange times of 256 KiB..2 MiB (in cache);
//   gamma     reduction throughput: bytes of float32 SUM (dst = dst + src)
//             per second of one core, on 256 KiB operands;
//   and, where large exchanges are slower, the caches: the rate of a 64 MiB
//   exchange and of a 64 MiB reduction, and the size where the exchange
//   rate falls from one to the other (cache_bytes).
//
// The profile is YAML (version: 1, network: {...}) with the keys of a
// scenario's network section; scenarios name it (network: {profile: F}) and
// `collie run --profile F` / `collie bench --backend sim --profile F` use it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "sim/network_model.h"

namespace collie::tools {

struct CalibrateCommand {
  std::string backend = "tcp";                 // only tcp (real processes on this host) today
  std::string output = "collie-profile.yaml";  // where the profile is written
  bool validate = false;                       // then compare predicted with measured times
  std::string profile;                         // --validate this profile instead of measuring one
  std::vector<int> worlds = {2, 3, 4};         // --validate: world sizes
  std::string ops = "all_reduce,broadcast,reduce,all_gather";  // --validate: collectives
  std::string sizes = "8,1K,16K,64K,256K,1M,4M,16M,64M";     // --validate: message sizes
};

CLI::App* add_calibrate_command(CLI::App& app, CalibrateCommand& cmd);

// Returns collie's exit code: 0 done (the validation's verdict is printed,
// not returned), 1 a measurement failed, 2 bad usage.
int run_calibrate_command(const CalibrateCommand& cmd);

// The fit, exposed for tests: alpha from the smallest exchange, beta from
// the least-squares slope of the exchanges of at least `large_bytes`.
struct ExchangeSample {
  double bytes = 0;
  double time_us = 0;
};
sim::LinkModel fit_link(const std::vector<ExchangeSample>& samples, double large_bytes = 1 << 20);

}  // namespace collie::tools
