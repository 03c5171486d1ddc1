#include "tools/run_script.h"


#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "scenario/run_report.h"
#include "script/script_run.h"
#include "tools/backend_flags.h"
#include "tools/result_json.h"

namespace collie::tools {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitInvalid = 2;

// -v stamps the program's lines (printed as they came), and adds nothing
// here: the summary stays the same bytes every run.
void print_result(const script::ScriptResult& result) {
  scenario::ReportLayout layout;
  layout.title = result.run.file;
  layout.output = false;
  layout.program = result.program;
  layout.recorded = result.record_path;
  scenario::print_run_report(std::cout, result.run, layout);
}

nlohmann::json to_json(const script::ScriptResult& result) {
  const scenario::ScenarioResult& r = result.run;
  nlohmann::json j;
  j["command"] = r.file;
  j["program"] = result.program;
  add_run_fields(j, r);
  if (!result.record_path.empty()) j["recorded"] = result.record_path;
  add_output(j, r);
  return j;
}

}  // namespace

bool is_script_run(int argc, char** argv) {
  if (argc < 3 || std::strcmp(argv[1], "run") != 0) return false;
  for (int i = 2; i < argc; ++i)
    if (std::strcmp(argv[i], "--") == 0) return true;
  return false;
}

int run_script_command(int argc, char** argv) {
  int split = 2;
  while (split < argc && std::strcmp(argv[split], "--") != 0) ++split;
  script::ScriptOptions o;
  for (int i = split + 1; i < argc; ++i) o.command.emplace_back(argv[i]);

  CLI::App app{"collie run [FLAGS] -- COMMAND...: run an unmodified torch.distributed program on collie"};
  app.name("collie run");
  BackendFlags flags;
  double timeout_us = 0, compute_timeout_s = 300, join_timeout_s = 120;
  bool json = false, quiet = false;
  int verbose = 0;
  app.add_option("-n,--nproc", o.nprocs,
                 "start N copies of the command with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, "
                 "MASTER_ADDR, MASTER_PORT); default: the command once, which spawns its own ranks")
      ->check(CLI::Range(1, 4096));
  app.add_option("--backend", o.backend, "the backend the program's ops run on (default sim)");
  app.add_option("--seed", o.seed, "seed of every random choice of the simulator (default 1)");
  app.add_option("--fault", o.faults,
                 "inject a fault: the simulator's (drop:..., crash:rank=R,op=K, ...; docs/faults.md) or, on a "
                 "process backend, crash:rank=R,op=K / stall:rank=R,op=K,ms=T; repeatable");
  auto* timeout_opt = app.add_option("--timeout-us", timeout_us, "every op's timeout (virtual time on the simulator)")
                          ->check(CLI::PositiveNumber);
  app.add_option("--compute-timeout", compute_timeout_s,
                 "seconds of wall time a rank may compute between two calls before it is called stuck (default 300)")
      ->check(CLI::PositiveNumber);
  app.add_option("--join-timeout", join_timeout_s,
                 "seconds of wall time for every rank to call init_process_group (default 120)")
      ->check(CLI::PositiveNumber);
  app.add_option("--listen", o.listen_host,
                 "the address the program's processes connect to (default 127.0.0.1; another host's ranks, "
                 "under srun or mpirun, need one they can reach)");
  app.add_option("--trace", o.trace_path, "write a Chrome trace (Perfetto) of the run to this file");
  app.add_option("--report-dot", o.dot_path, "write the wait-for graph (Graphviz) here when the run deadlocks");
  app.add_option("--record", o.record_path,
                 "write the ops the program issued as a scenario file that `collie run FILE` replays");
  app.add_flag("--in-process", o.in_process, "with --backend tcp: every rank in this process");
  app.add_flag("--strict", o.strict, "a library's differences where torch is silent fail the run");
  app.add_flag("--json", json, "print the result as JSON instead of text");
  app.add_flag("-q,--quiet", quiet, "print only the summary");
  app.add_flag("-v,--verbose", verbose, "prefix the program's lines with rank and virtual time");
  flags.add_to(app);
  try {
    app.parse(split - 1, argv + 1);  // argv[1] ("run") stands for the program name
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitInvalid;
  }
  if (int rc = flags.apply()) return rc;
  if (o.command.empty()) {
    std::cerr << "collie run: give the program after --, e.g. collie run -n 2 -- python train.py\n";
    return kExitInvalid;
  }
  for (const std::string* path : {&o.trace_path, &o.dot_path, &o.record_path}) {
    if (path->empty()) continue;
    std::ofstream f(*path, std::ios::binary | std::ios::app);
    if (!f) {
      std::cerr << "collie run: cannot write " << *path << " (" << std::strerror(errno) << ")\n";
      return kExitInvalid;
    }
  }
  if (*timeout_opt) o.timeout_ns = static_cast<Nanos>(timeout_us * 1000);
  o.compute_timeout_ns = static_cast<Nanos>(compute_timeout_s * 1e9);
  o.join_timeout_ns = static_cast<Nanos>(join_timeout_s * 1e9);
  o.out = json || quiet ? nullptr : &std::cout;
  o.stamps = verbose > 0;
  o.replay_flags = flags.replay();
  script::ScriptResult r;
  try {
    r = script::run_script(o);
  } catch (const Error& e) {
    std::cerr << "collie run: " << e.detail() << "\n";
    return kExitInvalid;
  }
  if (json) std::cout << to_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else print_result(r);
  return r.run.passed ? kExitOk : kExitFailed;
}

}  // namespace collie::tools
