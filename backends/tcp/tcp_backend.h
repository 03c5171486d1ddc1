// The in-process TCP world: every rank of a job in this process, each with
// its own TcpTransport and real loopback sockets, all driven by one
// TcpEventLoop on one thread. It runs the scenario runner and the
// conformance suite over real TCP (collie conformance --backend tcp).
#pragma once

#include "backends/registry.h"

namespace collie::tcp {

// Adds the "tcp" backend to `registry`.
void register_tcp_backend(BackendRegistry& registry);

}  // namespace collie::tcp
