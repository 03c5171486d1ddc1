// torch.distributed as a backend under test: "torch:NAME" runs NAME (gloo,
// mpi, nccl, or a backend of your own that a module given with
// --torch-import registers) through torch's Python API, one process per
// rank, each a collie_torch_worker.py driven over the op protocol.
//
// Settings come from the environment, which the collie command sets from
// its flags: COLLIE_PYTHON (--python; default /usr/bin/python3, Debian's
// torch, else python3 on PATH) and COLLIE_TORCH_IMPORT (--torch-import).
#pragma once

#include <string>

#include "backends/backend_info.h"

namespace collie::torch {

// The torch:NAME family, for the registry (backends/builtin_backends.cpp).
BackendFamily make_torch_backends();

// The Python interpreter the driver runs under.
std::string python();

// Why this machine's Python finds no torch module, or "" when it finds one.
// Only a lookup (importlib's find_spec, ~30 ms), not an import (~1.5 s): a
// torch that is found but broken shows up where it is first imported.
std::string missing();

// What this machine's torch offers, for `collie backends`: "torch 1.13.0a0
// under /usr/bin/python3: gloo yes, mpi no, nccl no", or why there is none.
std::string probe();

}  // namespace collie::torch
