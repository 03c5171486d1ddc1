// The backends collie can check, and how each starts a job.
//
// A backend is either in-process -- transports for N ranks under collie's
// core (backends/backend.h: the simulator, in-process TCP, plugins) -- or a
// process backend -- one process per rank, driven through the op-level seam
// (TCP as processes, Open MPI, torch.distributed). Some are both (tcp).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backends/backend_info.h"
#include "backends/job.h"

namespace collie {

class BackendRegistry {
 public:
  // The backends compiled into this binary ("sim" first), as
  // backends/builtin_backends.cpp lists them.
  static BackendRegistry& builtin();

  void add(BackendInfo info);
  // A family of backends named "PREFIX:anything": find() makes the entry for
  // a name on first use.
  void add(BackendFamily family);
  const BackendInfo* find(std::string_view name) const;
  // find(), or Error(kUsage) naming the backends there are.
  const BackendInfo& require(std::string_view name) const;
  std::vector<const BackendInfo*> list() const;
  std::vector<std::string> names() const;  // families as "PREFIX:NAME"
  using Family = BackendFamily;
  const std::vector<Family>& families() const { return families_; }

  // Loads a backend plugin (a shared library exporting collie_backend_plugin)
  // and registers it. Returns its name. Throws Error(kUsage) saying what is
  // wrong: the file, the symbol, the ABI version, a duplicate name.
  std::string load_plugin(const std::string& path);

 private:
  mutable std::vector<std::unique_ptr<BackendInfo>> backends_;  // families' members join on first find()
  std::vector<Family> families_;
  std::vector<void*> handles_;  // dlopen handles, kept for the process lifetime
};

// Keeps one job running between runs (collie conformance over a process
// backend: a job is started once for every case of its world size), one
// for each thread that uses it (the suite's lanes run cases side by side,
// each on a job of its own). get() returns the calling thread's kept job
// when it is reusable, of the same backend and world size, else starts a
// new one (ending the kept one first); release() ends the job unless it
// can run again. In-process jobs are never kept.
// Jobs it starts track their ops in flight, and in_flight_report() may be
// called from another thread (the suite's watchdog) at any time.
class JobCache {
 public:
  ~JobCache();
  Job& get(const BackendInfo& info, const JobOptions& options, bool processes);
  void release();
  void clear();
  // clear(), then waits until the processes of this thread's jobs are gone:
  // a thread that started processes calls it before it ends (a child's
  // parent-death signal follows the thread that started it).
  void end_thread();
  // Every thread's current job's Job::in_flight_report(); empty when none.
  std::string in_flight_report() const;

 private:
  struct Kept {
    std::unique_ptr<Job> job;
    std::string backend;
    int world = 0;
  };
  mutable std::mutex mu_;  // guards kept_ against other threads
  std::map<std::thread::id, Kept> kept_;
};

// How a job of `info` runs: its own processes when `processes` (the
// backend must have start), else in this process over its transports.
std::unique_ptr<Job> start_job(const BackendInfo& info, const JobOptions& options, bool processes);

}  // namespace collie
