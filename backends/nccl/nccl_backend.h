// `--backend nccl`: NCCL through the op-level seam (nccl_dist.h), one
// process per GPU (collie-nccl-worker), started by collie as a process job
// (backends/remote/process_job.h). Rank 0's NCCL unique id goes to every
// rank through the controller's join (op_protocol.h: the hello's
// "bootstrap"). Rank r runs on CUDA device LOCAL_RANK % devices: a world
// larger than the GPUs present is refused by NCCL itself, and its cases
// are skipped in NCCL's words. Plain C++: the worker alone links CUDA and
// loads libnccl at run time.
#pragma once

#include "backends/backend_info.h"

namespace collie::nccl {

BackendInfo make_nccl_backend();

}  // namespace collie::nccl
