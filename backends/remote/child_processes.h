// The processes a job starts (rank processes, or one launcher such as
// mpirun that starts them), owned so that none outlives the job.
//
// Every child runs in one new process group, gets SIGKILL if this process
// dies (PR_SET_PDEATHSIG), and has its stdout and stderr captured (the tail
// is kept for error messages). Destroying the set, or terminate(), sends
// SIGTERM to the group, waits a grace period, then SIGKILLs what is left,
// and reaps everything.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace collie::remote {

class ForkServer;

struct ChildSpec {
  std::vector<std::string> argv;                            // argv[0] is looked up in PATH
  std::vector<std::pair<std::string, std::string>> env;     // set on top of this process's environment
  int cpu = -1;                                             // pin it to this CPU (-1: do not)
  // Forked by this server (a copy of a process that has run argv's
  // start-up once: fork_server.h) instead of started from argv; from argv
  // when the server cannot serve. Not pinned.
  std::shared_ptr<ForkServer> fork_server = nullptr;
};

class ChildProcesses {
 public:
  // Starts every child. A program that cannot be executed exits with code
  // 127 after writing why to its (captured) stderr.
  explicit ChildProcesses(const std::vector<ChildSpec>& children);
  ~ChildProcesses();
  ChildProcesses(const ChildProcesses&) = delete;
  ChildProcesses& operator=(const ChildProcesses&) = delete;

  std::size_t size() const { return children_.size(); }
  pid_t pid(std::size_t i) const { return children_[i].pid; }

  // Collects the exit status of every child that has ended (non-blocking).
  void reap();
  // Blocks until every child has exited, taking all of their output.
  void wait_all();
  bool exited(std::size_t i) const { return children_[i].status.has_value(); }
  bool all_exited() const;
  // How child i ended: "exited with code 1", "killed by signal 9 (Killed)";
  // empty while it runs.
  std::string fate(std::size_t i) const;
  // Whether child i ended normally with code 0.
  bool succeeded(std::size_t i) const;

  // The pipes carrying the children's output, for poll(); read_output()
  // takes what is there (non-blocking) from the pipe `fd`, and hands it to
  // the output handler as well, if one is set.
  std::vector<int> output_fds() const;
  void read_output(int fd);
  void set_output_handler(std::function<void(std::size_t child, std::string_view bytes)> handler) {
    on_output_ = std::move(handler);
  }
  // The last `max_bytes` child i wrote (stdout and stderr together).
  std::string output_tail(std::size_t i, std::size_t max_bytes = 2000) const;

  void signal(std::size_t i, int sig);
  // `sig` to every child still running (the whole process group).
  void signal_all(int sig);
  // SIGTERM to the group, up to `grace_s` for them to exit, then SIGKILL.
  void terminate(double grace_s = 2.0);

 private:
  struct Child {
    pid_t pid = -1;
    int out_fd = -1;
    std::string output;  // the tail of what it wrote
    std::optional<int> status;
    std::shared_ptr<ForkServer> server;  // its parent, which reports its status; null: this process
  };
  // Collects child c's status, waiting up to `timeout_ns` (0: not at all).
  void reap(Child& c, std::int64_t timeout_ns);
  std::vector<Child> children_;
  pid_t group_ = -1;
  std::function<void(std::size_t, std::string_view)> on_output_;
};

// Ends `children` without waiting for them: terminate(grace_s) runs on a
// reaper thread of this process, so that a job's teardown (mpirun's takes
// a second) overlaps what runs next. A child's PR_SET_PDEATHSIG follows the
// thread that started it: that thread must outlive the reaping (call
// wait_for_ended_children() before it ends). Safe from any thread.
void end_in_background(std::unique_ptr<ChildProcesses> children, double grace_s = 2.0);
// Blocks until every set given to end_in_background() is reaped. Also run
// when this process exits normally.
void wait_for_ended_children();

// "exited with code 3", "killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

// Whether process `pid` of this host has ended: gone, or a zombie (it exited
// and waits for its parent, or init, to reap it). A process killed with
// SIGKILL closes its descriptors before it becomes a zombie: a closed
// connection alone does not say that it ended.
bool process_ended(long pid);

// This program's own path (/proc/self/exe), to start more of itself.
std::string self_executable();

// A TCP port on 127.0.0.1 that is free now, below Linux's ephemeral range
// (32768+) so that no outgoing connection takes it before its user binds.
// Never one this process handed out before (the last 8,192 of them): jobs
// started side by side take seconds to bind theirs, and a free port drawn
// twice in that window made the second job's rank 0 fail to listen.
// Thread-safe.
int free_local_port();

}  // namespace collie::remote
