#include "backends/mpi/mpi_backend.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>

#include "backends/remote/process_job.h"

#ifndef COLLIE_MPI_WORKER
#define COLLIE_MPI_WORKER ""
#endif

namespace collie::mpi {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string find_on_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0 ? program : "";
  std::stringstream dirs(env("PATH"));
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return dir + "/" + program;
  return {};
}

std::string mpirun() { return env("COLLIE_MPIRUN").empty() ? "mpirun" : env("COLLIE_MPIRUN"); }

std::string worker() {
  if (const std::string w = env("COLLIE_MPI_WORKER"); !w.empty()) return w;
  const std::filesystem::path beside = std::filesystem::path(remote::self_executable()).parent_path() / "collie-mpi-worker";
  std::error_code ec;
  if (std::filesystem::exists(beside, ec)) return beside.string();
  if (*COLLIE_MPI_WORKER && std::filesystem::exists(COLLIE_MPI_WORKER, ec)) return COLLIE_MPI_WORKER;
  return {};
}

bool is_open_mpi(const std::string& launcher) {
  const std::string cmd = "'" + launcher + "' --version 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(cmd.c_str(), "r"), ::pclose);
  if (!p) return false;
  std::string out;
  std::array<char, 256> buf{};
  while (std::fgets(buf.data(), buf.size(), p.get())) out += buf.data();
  return out.find("Open MPI") != std::string::npos || out.find("OpenRTE") != std::string::npos;
}

std::string explain(const std::string& output) {
  if (output.find("attempt to run as root") != std::string::npos)
    return "mpirun refuses to run as root; collie sets OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
           "for Open MPI's mpirun, so this launcher is another one (or ignores them): run collie as a user, or give "
           "the launcher's own flag with --mpirun-args";
  if (output.find("not enough slots") != std::string::npos)
    return "mpirun has not enough slots for the world (give --mpirun-args \"--oversubscribe\" or a hostfile)";
  std::string t = output;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  std::istringstream lines(t);
  std::string line, first;
  while (std::getline(lines, line))
    if (first.empty() && line.find_first_not_of("- ") != std::string::npos) first = line;
  return first.empty() ? "" : "mpirun said: " + first;
}

}  // namespace

BackendInfo make_mpi_backend() {
  BackendInfo info;
  info.name = "mpi";
  info.description = "an MPI library through its C API (collie-mpi-worker under mpirun), one process per rank";
  info.selection = "--backend mpi [--mpirun PATH] [--mpirun-args \"ARGS\"] [--controller-host ADDRESS]";
  info.collie_core = false;
  info.no_timeouts = "MPI has no operation timeouts: its calls block until they complete";
  info.unavailable = []() -> std::optional<std::string> {
    if (worker().empty())
      return std::string(*COLLIE_MPI_WORKER ? "collie-mpi-worker is not beside collie (set COLLIE_MPI_WORKER)"
                                            : "collie was built without MPI (CMake found no MPI C library; install "
                                              "libopenmpi-dev and rebuild)");
    if (find_on_path(mpirun()).empty())
      return "'" + mpirun() + "' was not found (install openmpi-bin, or give the launcher with --mpirun PATH)";
    return std::nullopt;
  };
  info.start = [](const JobOptions& o) {
    remote::ProcessJobSpec spec;
    spec.backend = "mpi";
    spec.child_per_rank = false;
    spec.library_timeouts = false;  // MPI has none (no_timeouts above)
    spec.serves_smaller_worlds = true;  // MPI_Comm_create_group: members only
    spec.explain_failed_start = explain;
    if (const std::string host = env("COLLIE_CONTROLLER_HOST"); !host.empty()) spec.listen_host = host;
    const std::string launcher = find_on_path(mpirun());
    const bool open_mpi = is_open_mpi(launcher);
    spec.children = [launcher, open_mpi](int world, const std::string& controller, const std::string& token) {
      remote::ChildSpec c;
      c.argv = {launcher, "-n", std::to_string(world)};
      if (open_mpi) c.argv.insert(c.argv.end(), {"-x", "COLLIE_CONTROLLER", "-x", "COLLIE_JOB_TOKEN"});
      std::stringstream extra(env("COLLIE_MPIRUN_ARGS"));
      for (std::string a; extra >> a;) c.argv.push_back(a);
      c.argv.push_back(worker());
      c.env = {{"COLLIE_CONTROLLER", controller}, {"COLLIE_JOB_TOKEN", token}};
      if (open_mpi) {
        c.env.emplace_back("OMPI_MCA_rmaps_base_oversubscribe", "1");
        if (::geteuid() == 0) {
          c.env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
          c.env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        }
      }
      return std::vector<remote::ChildSpec>{c};
    };
    return remote::start_process_job(spec, o);
  };
  return info;
}

}  // namespace collie::mpi
