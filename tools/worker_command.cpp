#include "tools/worker_command.h"

#include <cstdlib>
#include <iostream>
#include <string>

#include "backends/remote/worker.h"
#include "backends/tcp/process_group.h"
#include "tools/bench_command.h"

namespace collie::tools {

int run_tcp_worker() {
  CommunicatorOptions co;
  if (const char* e = std::getenv("COLLIE_EAGER_THRESHOLD_BYTES"))
    co.eager_threshold_bytes = static_cast<std::size_t>(std::strtoull(e, nullptr, 10));
  if (const char* e = std::getenv("COLLIE_SCRIBBLE_COMPLETED_SENDS")) co.scribble_completed_sends = e == std::string("1");
  if (const char* e = std::getenv("COLLIE_FIRST_SEND_ID")) co.first_send_id = std::strtoull(e, nullptr, 10);
  std::unique_ptr<tcp::ProcessGroup> pg;
  try {
    pg = tcp::ProcessGroup::init({}, &co);
  } catch (const std::exception& e) {
    std::cerr << "collie worker: " << e.what() << "\n";
    return 1;
  }
  Communicator& c = pg->comm();
  remote::WorkerHooks hooks;
  hooks.bench = [](Dist& d, const nlohmann::json& options) { return bench_in_this_rank(d, options); };
  return remote::serve_ops(c, "collie core over tcp, one process per rank", hooks);
}

}  // namespace collie::tools
