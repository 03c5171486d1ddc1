// The command-line flags that select and configure a backend, shared by
// collie run, conformance, bench and backends: plugins, and the settings of
// the process backends (torch:NAME, mpi), which reach them through the
// environment (backends/torch/torch_backend.h, backends/mpi/mpi_backend.h)
// and are repeated in every replay command so that it runs as printed.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace collie::tools {

struct BackendFlags {
  std::vector<std::string> plugins;       // --backend-plugin LIB.so
  std::string python;                     // --python PATH
  std::vector<std::string> torch_imports; // --torch-import MODULE
  std::string mpirun;                     // --mpirun PATH
  std::string mpirun_args;                // --mpirun-args "ARGS"
  std::string mpi_worker;                 // --mpi-worker PATH
  std::string controller_host;            // --controller-host ADDRESS

  void add_to(CLI::App& app);
  // Loads the plugins and sets the environment; returns 2 (printing why) if
  // a plugin cannot be loaded, else 0.
  int apply() const;
  // The flags again, for replay commands.
  std::vector<std::string> replay() const;
};

}  // namespace collie::tools
