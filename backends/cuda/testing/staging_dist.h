// The tests' name for HostTensorDist (backends/cuda/host_tensor_dist.h):
// collie's core on a CudaWorld rank, taking host tensors.
#pragma once

#include "backends/cuda/host_tensor_dist.h"

namespace collie::cuda::testing {

using StagingDist = HostTensorDist;

}  // namespace collie::cuda::testing
