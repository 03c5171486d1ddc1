// How the op protocol (op_protocol.h) carries one call (core/op.h's
// DistCall), written once: the controller encodes, the C++ workers decode,
// and the Python worker (backends/torch/collie_torch_worker.py) reads the
// same fields. Nothing here knows one op from another beyond the table, so
// a new op travels without touching this file or the workers' decoding.
//
// An {"t":"op"} message's fields (besides "t", "id" and "group"):
//   "op"      the call's name: torch's, the async form's where it has its
//             own ("isend", "irecv")
//   "async"   the async form (isend/irecv, or async_op=True)
//   "peer"    dst / src / root, a global rank; "any_source": true instead
//             for a receive from any rank
//   "tag", "reduce_op" (SUM, ...), "algorithm" (one of collie's), "timeout_ns"
//             (the call's own timeout), "wait_all_ranks",
//   "input_split_sizes", "output_split_sizes" (elements)
//             -- each only where the op takes it and it is not the default
//   "must_be_pending"  the call cannot have completed when issued: a handle
//             saying is_completed() at once is wrong (DistCall::must_be_pending)
//   "poll_ns" (async only) when told to wait, first poll the handle's
//             is_completed() (MPI_Test) for up to this long, without
//             waiting; an op that completes only inside wait() then fails
//             (DistCall::poll_ns)
//   "layout"  how many buffers each slot holds, in slot order:
//             {"tensor": 1, "list": 4, "output": 1}; a slot this rank does
//             not pass (scatter's list off the root) is absent
//   "p2p"     batch_isend_irecv's ops [{"send": B, "peer": P, "tag": T}],
//             whose tensors follow the slots' buffers
//   "tensors" each buffer's {"dtype": D, "count": C}, in order; one blob each;
//             "shape": [d0, d1, ...] too where the program's tensor has two
//             or more dimensions (a library's worker shapes its tensor so;
//             collie's core reads the count only)
//   "writes"  the buffers this rank's call writes: a worker returns exactly
//             those (none when the rank is outside the op's group)
#pragma once

#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/op.h"
#include "core/tensor.h"

namespace collie::remote {

struct EncodedCall {
  nlohmann::json head;              // the fields above; the caller adds "t", "id" and "group"
  std::vector<TensorView> buffers;  // the caller's views, in order: where outputs land
};

// Encodes `c` as rank `rank` calls it.
EncodedCall encode_call(const DistCall& c, int rank);

// The buffers (indices in the op message's buffer order) that rank
// `rank`'s call of `c` writes: its "writes" field.
std::vector<std::size_t> written_buffers(const DistCall& c, int rank);

// A call decoded on a worker, over buffers of its own.
struct DecodedCall {
  DistCall call;                    // views into `tensors`; its group is the caller's to set
  std::vector<Tensor> tensors;      // the buffers, in order
  std::vector<std::size_t> writes;  // indices into `tensors`
};

// Decodes an op message whose blobs are `blobs`. Throws std::runtime_error
// saying what is malformed (an unknown op, buffers that disagree with the
// layout, a blob whose size is not its tensor's). Each buffer's first
// element lies kBufferHeadBytes + skew_elements x its dtype's size past a
// 64-byte boundary of its allocation (Tensor::with_head): skew_elements
// 1-7 hand a library addresses aligned only as the elements are, as a
// program's slices and views do.
inline constexpr std::size_t kBufferHeadBytes = 64;
DecodedCall decode_call(const nlohmann::json& head, const std::vector<std::vector<std::byte>>& blobs,
                        std::size_t skew_elements = 0);

}  // namespace collie::remote
