// A fork server: a process that does a slow start-up once (a Python
// interpreter importing torch: 1.5 s of CPU and more) and then forks
// copies of itself that run a program, so that a job's rank processes
// start in milliseconds instead of each repeating it. The server is
// backends/remote/collie_fork_server.py; ChildProcesses starts a child
// through one when its ChildSpec names it (child_processes.h).
//
// The protocol, over a SOCK_SEQPACKET socket pair (one JSON object a
// packet), the server's end passed as the descriptor COLLIE_FORK_SERVER_FD:
//   server -> collie  {"t":"ready"} once its imports are done;
//   collie -> server  {"t":"spawn","env":{K:V,...},"pgid":P} with one
//                     descriptor (SCM_RIGHTS): where the child's stdout and
//                     stderr go. P: the child's process group (0: a new one
//                     it leads). The child runs the server's program as
//                     __main__ with `env` on top of the server's environment,
//                     and dies with the server (PR_SET_PDEATHSIG);
//   server -> collie  {"t":"spawned","pid":N} or {"t":"spawn_failed",
//                     "error":TEXT}, in request order;
//                     {"t":"exited","pid":N,"status":S} when a child ends
//                     (S: its raw wait status).
// The server exits when its socket closes (this process ended), and its
// children with it.
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/executor.h"

namespace collie::remote {

class ForkServer {
 public:
  using Env = std::vector<std::pair<std::string, std::string>>;
  // The server runs `argv` with `env` on top of this process's environment;
  // it is started by the first spawn(), which waits up to `ready_timeout_ns`
  // for its imports.
  ForkServer(std::vector<std::string> argv, Env env, Nanos ready_timeout_ns);
  ~ForkServer();
  ForkServer(const ForkServer&) = delete;
  ForkServer& operator=(const ForkServer&) = delete;

  // Starts a child with `env`, its output going to `out_fd`, in process
  // group `pgid` (0: a new one). nullopt when the server cannot serve (it
  // failed to start or has died): the caller starts the program itself.
  // Safe from any thread.
  std::optional<pid_t> spawn(const Env& env, int out_fd, pid_t pgid);
  // Child `pid`'s raw wait status once it ended, waiting up to `timeout_ns`
  // (0: only what has arrived). A child of a server that died was killed
  // with it (SIGKILL).
  std::optional<int> exit_status(pid_t pid, Nanos timeout_ns = 0);

 private:
  bool start_locked();
  // Reads the server's packets for up to `timeout_ms` (-1: until one
  // arrives); false once the server is gone.
  bool pump_locked(int timeout_ms);
  void lost_locked();
  std::optional<int> take_locked(pid_t pid);  // and forgets it

  std::mutex mu_;
  std::vector<std::string> argv_;
  Env env_;
  Nanos ready_timeout_ns_;
  bool tried_ = false;
  bool alive_ = false;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::vector<std::string> replies_;  // "spawned"/"spawn_failed" packets not yet taken
  std::map<pid_t, int> exited_;       // children's wait statuses
  std::vector<pid_t> children_;       // started and not yet reported ended
};

}  // namespace collie::remote
