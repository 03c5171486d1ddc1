// `collie calibrate`: measure a real backend's costs and write the
// simulator's network profile; with --validate, compare the simulator's
// predictions on that profile with measured times.
//
//   overhead  CPU time per message: a stream of 8-byte broadcasts, 2 ranks;
//   alpha     what an 8-byte exchange between 2 ranks (each sends to the
//             other at once, as every ring step does) leaves after that;
//   beta      bandwidth: the median rate of the exchanges of 256 KiB..2 MiB
//             (in cache; tools/exchange_fit.h);
//   gamma     reduction throughput: bytes of float32 SUM (dst = dst + src)
//             per second of one core, on 256 KiB operands;
//   and, where large exchanges are slower, the caches: the rate of a 64 MiB
//   exchange, and the working set (both messages of an exchange) where the
//   rate falls from one to the other (cache_bytes); on hosts of at most 16
//   cores, time slicing's factor on CPU costs, from ring shifts with one rank more
//   than the host has cores.
// Every series is the best of 3 rounds; with --validate, the validated
// collectives are measured in the same rounds (the host's drift reaches
// both alike) but never used to fit the profile.
//
// The profile is YAML (version: 1, network: {...}) with the keys of a
// scenario's network section; scenarios name it (network: {profile: F}) and
// `collie run --profile F` / `collie bench --backend sim --profile F` use it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

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

}  // namespace collie::tools
