#include "tools/backend_flags.h"

#include <cstdlib>
#include <iostream>

#include "backends/registry.h"
#include "core/error.h"
#include "core/text.h"

namespace collie::tools {

void BackendFlags::add_to(CLI::App& app) {
  // Repeatable options take one value each: the scenario files that follow stay positional.
  app.add_option("--backend-plugin", plugins, "load a backend plugin (a shared library); repeatable")
      ->allow_extra_args(false);
  app.add_option("--python", python, "torch:NAME: the Python with torch (default /usr/bin/python3, else python3)");
  app.add_option("--torch-import", torch_imports,
                 "torch:NAME: import this module first (one that registers your backend with "
                 "torch.distributed.Backend.register_backend), or a .py file; repeatable")
      ->allow_extra_args(false);
  app.add_option("--mpirun", mpirun, "mpi: the launcher (default mpirun on PATH)");
  app.add_option("--mpirun-args", mpirun_args, "mpi: more launcher arguments, e.g. \"--hostfile hosts\"");
  app.add_option("--mpi-worker", mpi_worker,
                 "mpi: the worker program, built against the launcher's MPI (default collie-mpi-worker beside "
                 "collie; collie-mpi-worker-NAME for another MPI)");
  app.add_option("--controller-host", controller_host,
                 "process backends: the IPv4 address rank processes on other hosts reach this collie at "
                 "(default 127.0.0.1)");
}

int BackendFlags::apply() const {
  for (const auto& p : plugins) {
    try {
      BackendRegistry::builtin().load_plugin(p);
    } catch (const Error& e) {
      std::cerr << "collie: " << e.detail() << "\n";
      return 2;
    }
  }
  if (!python.empty()) ::setenv("COLLIE_PYTHON", python.c_str(), 1);
  if (!torch_imports.empty()) {
    std::string joined;
    for (const auto& m : torch_imports) joined += (joined.empty() ? "" : ",") + m;
    ::setenv("COLLIE_TORCH_IMPORT", joined.c_str(), 1);
  }
  if (!mpirun.empty()) ::setenv("COLLIE_MPIRUN", mpirun.c_str(), 1);
  if (!mpirun_args.empty()) ::setenv("COLLIE_MPIRUN_ARGS", mpirun_args.c_str(), 1);
  if (!mpi_worker.empty()) ::setenv("COLLIE_MPI_WORKER", mpi_worker.c_str(), 1);
  if (!controller_host.empty()) ::setenv("COLLIE_CONTROLLER_HOST", controller_host.c_str(), 1);
  return 0;
}

std::vector<std::string> BackendFlags::replay() const {
  std::vector<std::string> out;
  for (const auto& p : plugins) out.insert(out.end(), {"--backend-plugin", shell_quote(p)});
  if (!python.empty()) out.insert(out.end(), {"--python", shell_quote(python)});
  for (const auto& m : torch_imports) out.insert(out.end(), {"--torch-import", shell_quote(m)});
  if (!mpirun.empty()) out.insert(out.end(), {"--mpirun", shell_quote(mpirun)});
  if (!mpirun_args.empty()) out.insert(out.end(), {"--mpirun-args", shell_quote(mpirun_args)});
  if (!mpi_worker.empty()) out.insert(out.end(), {"--mpi-worker", shell_quote(mpi_worker)});
  if (!controller_host.empty()) out.insert(out.end(), {"--controller-host", shell_quote(controller_host)});
  return out;
}

}  // namespace collie::tools
