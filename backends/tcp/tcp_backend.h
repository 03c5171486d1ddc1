// The "tcp" backend, as the registry lists it (backends/builtin_backends.cpp):
// collie's core over real TCP sockets on 127.0.0.1. In this process, every
// rank of a job has its own TcpTransport and real loopback sockets, all
// driven by one TcpEventLoop on one thread (the scenario runner and
// collie conformance --backend tcp); as processes, one `collie worker
// --backend tcp` per rank (collie run --backend tcp).
#pragma once

#include "backends/backend_info.h"

namespace collie::tcp {

BackendInfo make_tcp_backend();

}  // namespace collie::tcp
