#include "backends/mpi/mpi_backend.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <vector>

#include "backends/mpi/mpi_version.h"
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

// What `launcher --version` says it is ("Open MPI 4.1.4", "MPICH 4.0.2
// (Hydra)"), or empty.
std::string launcher_version(const std::string& launcher) {
  const std::string cmd = "'" + launcher + "' --version 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(cmd.c_str(), "r"), ::pclose);
  if (!p) return {};
  std::string out;
  std::array<char, 256> buf{};
  while (std::fgets(buf.data(), buf.size(), p.get())) out += buf.data();
  return launcher_banner(out);
}

// The other workers beside `worker`: the default one and those built for
// other MPI libraries (cmake/MpiWorkers.cmake: collie-mpi-worker-NAME).
std::vector<std::string> other_workers(const std::string& worker) {
  std::vector<std::string> out;
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(worker).parent_path();
  for (const auto& e : std::filesystem::directory_iterator(dir.empty() ? "." : dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("collie-mpi-worker", 0) == 0 && e.path().filename() != std::filesystem::path(worker).filename())
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A worker that says it is rank 0 of a world of 1 under an mpirun of N:
// its MPI library is not the launcher's (each process started alone).
std::string explain_wrong_world(const std::string& launcher, const std::string& launcher_says,
                                const std::string& worker, int world_said, const std::string& library) {
  const std::string ours = library.empty() ? "an MPI library" : library;
  const std::string theirs = launcher_says.empty() ? "another MPI" : launcher_says;
  std::string advice = "the worker " + worker + " runs " + ours + ", but the launcher " + launcher + " is " + theirs +
                       (world_said == 1 ? ", so each process it started came up alone, as rank 0 of 1" : "") +
                       ". The worker must be built against the launcher's MPI: give that MPI's launcher with "
                       "--mpirun, or a worker built against " +
                       (mpi_family(theirs).empty() ? theirs : mpi_family(theirs)) + " with --mpi-worker PATH (cmake -DCOLLIE_EXTRA_MPI=NAME=/path/to/its/mpicc builds "
                       "tools/collie-mpi-worker-NAME; docs/external_backends.md, \"Any MPI\")";
  const std::vector<std::string> others = other_workers(worker);
  if (!others.empty()) {
    advice += "; workers built for other MPIs here:";
    for (const std::string& o : others) advice += " " + o;
  }
  return advice;
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

// The launchers' own clean-up notices (MPICH's Hydra, Open MPI's mpirun),
// which follow a rank's death and hide its last words. Their lines that
// name the signal ("YOUR APPLICATION TERMINATED WITH THE EXIT STRING:
// Segmentation fault (signal 11)", "mpirun noticed that process rank 1 ...
// exited on signal 11") are kept.
bool launcher_noise(const std::string& line) {
  if (line.find_first_not_of("=-*| \t\r") == std::string::npos) return true;  // a rule
  static const char* const kNotices[] = {"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
                                         "RUNNING AT ",
                                         "EXIT CODE: ",
                                         "CLEANING UP REMAINING PROCESSES",
                                         "YOU CAN IGNORE THE BELOW CLEANUP MESSAGES",
                                         "This typically refers to a problem with your application",
                                         "Please see the FAQ page for debugging suggestions",
                                         "Primary job  terminated normally",
                                         "a non-zero exit code. Per user-direction, the job has been aborted",
                                         "==== backtrace (",
                                         "collie worker (rank "};
  for (const char* n : kNotices)
    if (line.find(n) != std::string::npos) return true;
  return false;
}

}  // namespace

BackendInfo make_mpi_backend() {
  BackendInfo info;
  info.name = "mpi";
  info.description = "an MPI library through its C API (collie-mpi-worker under mpirun), one process per rank";
  info.selection =
      "--backend mpi [--mpirun PATH] [--mpirun-args \"ARGS\"] [--mpi-worker PATH] [--controller-host ADDRESS]";
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
    spec.last_words = [](const std::string& output) { return remote::last_lines(output, 6, launcher_noise); };
    if (const std::string host = env("COLLIE_CONTROLLER_HOST"); !host.empty()) spec.listen_host = host;
    const std::string launcher = find_on_path(mpirun());
    const std::string launcher_says = launcher_version(launcher);
    const bool open_mpi = mpi_family(launcher_says) == "Open MPI";
    spec.explain_wrong_world = [launcher, launcher_says](int world_said, const std::string& library) {
      return explain_wrong_world(launcher, launcher_says, worker(), world_said, library);
    };
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
