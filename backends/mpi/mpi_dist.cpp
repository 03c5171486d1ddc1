#include "backends/mpi/mpi_dist.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <thread>

#include "backends/mpi/mpi_version.h"
#include "core/error.h"

namespace collie::mpi {

namespace {

std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<std::size_t>(len));
}

[[noreturn]] void unsupported(int rank, const char* op, const std::string& what) {
  throw Error(ErrorKind::kUnsupported, OpContext{rank, op, "", -1, {}}, what);
}

// The MPI type of `t` for an op that reduces it.
MPI_Datatype datatype(int rank, const char* op, DType t) {
  switch (t) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kInt8: return MPI_INT8_T;
    case DType::kUInt8: return MPI_UINT8_T;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kBool: return MPI_C_BOOL;
    case DType::kFloat16:
#ifdef MPIX_C_FLOAT16
      return MPIX_C_FLOAT16;
#else
      unsupported(rank, op, "float16: MPI has no standard half-precision type and this library has no MPIX_C_FLOAT16");
#endif
    case DType::kBFloat16:
      unsupported(rank, op, "bfloat16: MPI has no bfloat16 type");
  }
  unsupported(rank, op, "an unknown dtype");
}

// The MPI type of `t` for an op that only moves it (p2p, broadcast,
// scatter, gather, all_gather, all_to_all): the half types, which MPI has no
// standard type for, travel as 16-bit words (MPIX_C_FLOAT16 where the
// library has it): nothing is computed on them, and every bit arrives.
MPI_Datatype moved_datatype(int rank, const char* op, DType t) {
  if (t == DType::kBFloat16) return MPI_UINT16_T;
#ifndef MPIX_C_FLOAT16
  if (t == DType::kFloat16) return MPI_UINT16_T;
#endif
  return datatype(rank, op, t);
}

MPI_Op reduction(int rank, const char* op, ReduceOp r, DType t) {
  if (r == ReduceOp::kAvg) unsupported(rank, op, "ReduceOp AVG: MPI has no averaging reduction");
  if (t == DType::kBool) {  // C's logical type takes only the logical ops
    switch (r) {
      case ReduceOp::kSum: case ReduceOp::kMax: case ReduceOp::kBor: return MPI_LOR;
      case ReduceOp::kProduct: case ReduceOp::kMin: case ReduceOp::kBand: return MPI_LAND;
      case ReduceOp::kBxor: return MPI_LXOR;
      case ReduceOp::kAvg: break;
    }
  }
  switch (r) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kProduct: return MPI_PROD;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kBand: return MPI_BAND;
    case ReduceOp::kBor: return MPI_BOR;
    case ReduceOp::kBxor: return MPI_BXOR;
    case ReduceOp::kAvg: break;
  }
  unsupported(rank, op, "an unknown reduce op");
}

int count_of(const TensorView& t) {
  if (t.count > static_cast<std::size_t>(INT32_MAX))
    throw Error(ErrorKind::kUnsupported, OpContext{}, "more than 2^31 elements in one MPI call");
  return static_cast<int>(t.count);
}

}  // namespace

// ---- MpiExecutor -------------------------------------------------------------

void MpiExecutor::watch(MPI_Request request, std::function<void(const MPI_Status&)> then) {
  requests_.push_back(request);
  thens_.push_back(std::move(then));
}

bool MpiExecutor::progress() {
  if (requests_.empty()) return false;
  int index = MPI_UNDEFINED;
  MPI_Status status{};
  status.MPI_ERROR = MPI_SUCCESS;
  const int rc = MPI_Waitany(static_cast<int>(requests_.size()), requests_.data(), &index, &status);
  if (index == MPI_UNDEFINED || index < 0) {
    if (rc != MPI_SUCCESS) throw Error(ErrorKind::kTransport, OpContext{}, "MPI_Waitany: " + mpi_error(rc));
    return true;
  }
  finish(static_cast<std::size_t>(index), rc, status);
  return true;
}

void MpiExecutor::finish(std::size_t index, int rc, MPI_Status& status) {
  if (rc != MPI_SUCCESS && status.MPI_ERROR == MPI_SUCCESS) status.MPI_ERROR = rc;
  auto then = std::move(thens_[index]);
  requests_.erase(requests_.begin() + static_cast<std::ptrdiff_t>(index));
  thens_.erase(thens_.begin() + static_cast<std::ptrdiff_t>(index));
  then(status);  // may watch() new requests
}

void MpiExecutor::test() {
  for (std::size_t k = 0; k < requests_.size();) {
    int flag = 0;
    MPI_Status status{};
    status.MPI_ERROR = MPI_SUCCESS;
    const int rc = MPI_Test(&requests_[k], &flag, &status);
    if (!flag && rc == MPI_SUCCESS) {
      ++k;
      continue;
    }
    return finish(k, rc, status);  // one per call: what it watches is tested from the next
  }
}

// ---- MpiDist -----------------------------------------------------------------

MpiDist::MpiDist(MPI_Comm world) : world_comm_(world) {
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
  MPI_Comm_rank(world, &rank_);
  MPI_Comm_size(world, &world_size_);
  world_group_ = Group(world_group_state(world_size_, rank_));
  comms_[0] = Comm{world, world_group_.state()->members};
  MPI_Comm_dup(world, &comms_[0].monitor);
  MPI_Comm_set_errhandler(comms_[0].monitor, MPI_ERRORS_RETURN);
}

MpiDist::~MpiDist() { free_groups(); }

std::string MpiDist::library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  return library_banner(std::string(text, static_cast<std::size_t>(len)));
}

void MpiDist::free_groups() {
  for (auto it = comms_.begin(); it != comms_.end();) {
    if (it->first == 0) {
      ++it;
      continue;
    }
    if (it->second.comm != MPI_COMM_NULL) MPI_Comm_free(&it->second.comm);
    if (it->second.monitor != MPI_COMM_NULL) MPI_Comm_free(&it->second.monitor);
    it = comms_.erase(it);
  }
}

void MpiDist::destroy_group(const Group& g) {
  mark_group_destroyed(g, rank_);
  auto it = comms_.find(g.state()->id);
  if (it == comms_.end()) return;
  Comm c = it->second;
  comms_.erase(it);
  const int rc = c.comm != MPI_COMM_NULL ? MPI_Comm_free(&c.comm) : MPI_SUCCESS;
  const int monitor = c.monitor != MPI_COMM_NULL ? MPI_Comm_free(&c.monitor) : MPI_SUCCESS;
  if (rc != MPI_SUCCESS || monitor != MPI_SUCCESS)
    throw LibraryError("rank " + std::to_string(rank_) + ": destroy_group of " + g.name() +
                       ": MPI_Comm_free: " + mpi_error(rc != MPI_SUCCESS ? rc : monitor));
}

Group MpiDist::new_group(std::vector<int> ranks, Nanos timeout_ns, std::string name) {
  ranks = new_group_members(std::move(ranks), world_size_, rank_);
  auto g = new_group_state(++groups_, ranks, rank_, timeout_ns, std::move(name));
  Comm c{MPI_COMM_NULL, g->members};
  if (g->my_rank >= 0) {
    MPI_Group world_group, group;
    MPI_Comm_group(world_comm_, &world_group);
    MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &group);
    // Every member computes the same tag from the group's id.
    const int rc = MPI_Comm_create_group(world_comm_, group, g->id, &c.comm);
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    if (rc != MPI_SUCCESS)
      throw LibraryError("rank " + std::to_string(rank_) + ": new_group: MPI_Comm_create_group: " + mpi_error(rc));
    MPI_Comm_set_errhandler(c.comm, MPI_ERRORS_RETURN);
    // monitored_barrier's messages travel apart from the program's.
    if (const int dup = MPI_Comm_dup(c.comm, &c.monitor); dup != MPI_SUCCESS)
      throw LibraryError("rank " + std::to_string(rank_) + ": new_group: MPI_Comm_dup: " + mpi_error(dup));
    MPI_Comm_set_errhandler(c.monitor, MPI_ERRORS_RETURN);
  }
  comms_[g->id] = std::move(c);
  return Group(std::move(g));
}

const MpiDist::Comm* MpiDist::comm_of(const Group& g) const {
  const int id = g.is_world_default() ? 0 : g.state()->id;
  const auto it = comms_.find(id);
  if (it == comms_.end() || it->second.comm == MPI_COMM_NULL) return nullptr;
  return &it->second;
}

template <typename Start>
Work MpiDist::run(const char* op, const Comm& c, bool async, const Start& start, std::function<void()> after,
                  const int* source_group_rank) {
  // The hot path allocates one pooled WorkState and nothing else: errors
  // build their text when they happen.
  auto w = std::allocate_shared<WorkState>(PoolAllocator<WorkState>{});
  w->executor = &exec_;
  const int rank = rank_;
  auto fail = [w, op, rank](int rc) {
    w->finish(std::make_exception_ptr(LibraryError("rank " + std::to_string(rank) + ": " + op + ": " + mpi_error(rc))));
  };
  // The call returned (blocking) or its request completed: `after`, which
  // may find that the library broke MPI's rules (the op then fails with
  // that), the sender of a receive (a group rank, checked), done.
  auto complete = [w, after = std::move(after), members = c.members](int source) {
    if (after) {
      try {
        after();
      } catch (...) {
        w->finish(std::current_exception());
        return;
      }
    }
    if (source >= 0 && source < static_cast<int>(members->size())) w->source = (*members)[static_cast<std::size_t>(source)];
    w->finish();
  };
  if (!async) {
    const int rc = start(nullptr);
    if (rc != MPI_SUCCESS) fail(rc);
    else complete(source_group_rank ? *source_group_rank : -1);
    return Work(w);
  }
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = start(&req);
  if (rc != MPI_SUCCESS) {
    fail(rc);
    return Work(w);
  }
  exec_.watch(req, [fail, complete = std::move(complete)](const MPI_Status& st) {
    if (st.MPI_ERROR != MPI_SUCCESS) return fail(st.MPI_ERROR);
    complete(st.MPI_SOURCE);
  });
  return Work(w);
}

Work MpiDist::p2p(const char* op, bool async, TensorView t, int peer, int tag, const Group& g, Nanos timeout_ns) {
  const Comm* c = comm_of(g);
  if (!c) return completed_work(&exec_, true, std::string(op) + ": not a member");
  if (timeout_ns > 0)
    throw Error(ErrorKind::kInvalidArgument, OpContext{rank_, op, "", -1, {}},
                "a timeout of " + std::to_string(timeout_ns) + " ns was asked for; MPI has no operation timeouts");
  const MPI_Datatype dt = moved_datatype(rank_, op, t.dtype);
  const int n = count_of(t);
  int to = MPI_ANY_SOURCE;
  if (peer != kAnySource) {
    const auto at = std::find(c->members->begin(), c->members->end(), peer);
    if (at == c->members->end())
      throw Error(ErrorKind::kInvalidArgument, OpContext{rank_, op, "", -1, {peer}},
                  "rank " + std::to_string(peer) + " is not in the group");
    to = static_cast<int>(at - c->members->begin());
  }
  const bool is_send = std::string_view(op) == "send" || std::string_view(op) == "isend";
  int source = to;
  auto start = [&, comm = c->comm](MPI_Request* req) {
    if (is_send)
      return req ? MPI_Isend(t.data, n, dt, to, tag, comm, req) : MPI_Send(t.data, n, dt, to, tag, comm);
    if (req) return MPI_Irecv(t.data, n, dt, to, tag, comm, req);
    MPI_Status st;
    const int rc = MPI_Recv(t.data, n, dt, to, tag, comm, &st);
    source = st.MPI_SOURCE;
    return rc;
  };
  Work w = run(op, *c, async, start, {}, is_send ? nullptr : &source);
  // A receive reports the sender MPI's status names (blocking or not, from
  // a named source too, as torch's MPI backend reports it): a status that
  // names another rank is seen by the checks, not papered over.
  if (is_send) w.state()->source = -1;
  return w;
}

Work MpiDist::send(TensorView t, int dst, int tag, const Group& g, Nanos timeout_ns) {
  return p2p("send", false, t, dst, tag, g, timeout_ns);
}
// poll_ns: the worker that serves this Dist polls the request (MPI_Test).
Work MpiDist::isend(TensorView t, int dst, int tag, const Group& g, Nanos timeout_ns, Nanos /*poll_ns*/) {
  return p2p("isend", true, t, dst, tag, g, timeout_ns);
}
Work MpiDist::recv(TensorView t, int src, int tag, const Group& g, Nanos timeout_ns) {
  return p2p("recv", false, t, src, tag, g, timeout_ns);
}
Work MpiDist::irecv(TensorView t, int src, int tag, const Group& g, Nanos timeout_ns, Nanos /*poll_ns*/) {
  return p2p("irecv", true, t, src, tag, g, timeout_ns);
}

namespace {
// Cuts the contiguous `staging` of a gather into the caller's list.
std::function<void()> copy_out(std::shared_ptr<std::vector<std::byte>> staging, std::span<const TensorView> list) {
  return [staging, outs = std::vector<TensorView>(list.begin(), list.end())] {
    std::size_t at = 0;
    for (const TensorView& t : outs) {
      if (at + t.bytes() > staging->size()) break;
      std::memcpy(t.data, staging->data() + at, t.bytes());
      at += t.bytes();
    }
  };
}

int group_rank_of(const std::vector<int>& members, int global) {
  const auto at = std::find(members.begin(), members.end(), global);
  return at == members.end() ? -1 : static_cast<int>(at - members.begin());
}
}  // namespace

Work MpiDist::broadcast(TensorView t, int src, const Group& g, CollectiveOptions o) {
  const Comm* c = comm_of(g);
  if (!c) return completed_work(&exec_, true, "broadcast: not a member");
  const MPI_Datatype dt = moved_datatype(rank_, "broadcast", t.dtype);
  const int root = group_rank_of(*c->members, src), n = count_of(t);
  return run("broadcast", *c, o.async_op, [=, comm = c->comm](MPI_Request* req) {
    return req ? MPI_Ibcast(t.data, n, dt, root, comm, req) : MPI_Bcast(t.data, n, dt, root, comm);
  });
}

Work MpiDist::reduce(TensorView t, int dst, ReduceOp op, const Group& g, CollectiveOptions o) {
  const Comm* c = comm_of(g);
  if (!c) return completed_work(&exec_, true, "reduce: not a member");
  const MPI_Datatype dt = datatype(rank_, "reduce", t.dtype);
  const MPI_Op mop = reduction(rank_, "reduce", op, t.dtype);
  const int root = group_rank_of(*c->members, dst), n = count_of(t);
  const bool at_root = root == group_rank_of(*c->members, rank_);
  // Off the root the tensor is MPI's send buffer, which MPI only reads
  // (torch leaves it unspecified; an MPI build that wrote a partial result
  // there got a note only): compared at completion.
  std::function<void()> after;
  if (!at_root && t.bytes() > 0) {
    auto before = std::make_shared<std::vector<std::byte>>(t.byte_data(), t.byte_data() + t.bytes());
    after = [t, before, rank = rank_] {
      if (std::memcmp(before->data(), t.byte_data(), before->size()) == 0) return;
      std::size_t at = 0;
      while (at < before->size() && (*before)[at] == t.byte_data()[at]) ++at;
      throw LibraryError("rank " + std::to_string(rank) + ": reduce: MPI_Reduce changed its send buffer on this "
                         "non-root rank (byte " + std::to_string(at) + " of " + std::to_string(before->size()) +
                         "), which MPI only reads (collie passes the tensor as MPI's send buffer here; torch leaves "
                         "it unspecified, MPI does not)");
    };
  }
  return run("reduce", *c, o.async_op, [=, comm = c->comm](MPI_Request* req) {
    const void* send = at_root ? MPI_IN_PLACE : t.data;
    void* recv = at_root ? t.data : nullptr;
    return req ? MPI_Ireduce(send, recv, n, dt, mop, root, comm, req) : MPI_Reduce(send, recv, n, dt, mop, root, comm);
  }, std::move(after));
}

Work MpiDist::all_reduce(TensorView t, ReduceOp op, const Group& g, CollectiveOptions o) {
  const Comm* c = comm_of(g);
  if (!c) return completed_work(&exec_, true, "all_reduce: not a member");
  const MPI_Datatype dt = datatype(rank_, "all_reduce", t.dtype);
  const MPI_Op mop = reduction(rank_, "all_reduce", op, t.dtype);
  const int n = count_of(t);
  return run("all_reduce", *c, o.async_op, [=, comm = c->comm](MPI_Request* req) {
    return req ? MPI_Iallreduce(MPI_IN_PLACE, t.data, n, dt, mop, comm, req)
               : MPI_Allreduce(MPI_IN_PLACE, t.data, n, dt, mop, comm);
  });
}

Work MpiDist::scatter(TensorView out, int src, std::span<const TensorView> list, const Group& g, CollectiveOptions o) {
  const Comm* c = comm_of(g);
  if (!c) return completed_work(&exec_, true, "scatter: not a member");
  const MPI_Datatype dt = moved_datatype(rank_, "scatter", out.dtype);
  const int root = group_rank_of(*c->members, src), n = count_of(out);
  // The root's list, contiguous: MPI scatters one buffer.
  auto staging = std::make_shared<std::vector<std::byte>>();
  if (src == rank_) {
    for (const TensorView& t : list) staging->insert(staging->end(), t.byte_data(), t.byte_data() + t.bytes());
  }
  return run("scatter", *c, o.async_op, [=, comm = c->comm](MPI_Request* req) {
    void* send = staging->empty() ? nullptr : staging->data();
    return req ? MPI_Iscatter(send, n, dt, out.data, n, dt, root, comm, req)
               : MPI_Scatter(send, n, dt, out.data, n, dt, root, comm);
  }, [staging] {});
}

Work MpiDist::gather(TensorView in, int dst, std::span<const TensorView> list, const Group& g, CollectiveOptions o) {
  const Comm* c = comm_of(g);
  if (!c) return completed_work(&exec_, true, "gather: not a member");
  const MPI_Datatype dt = moved_datatype(rank_, "gather", in.dtype);
  const int root = group_rank_of(*c->members, dst), n = count_of(in);
  auto staging = std::make_shared<std::vector<std::byte>>(dst == rank_ ? in.bytes() * c->members->size() : 0);
  return run("gather", *c, o.async_op, [=, comm = c->comm](MPI_Request* req) {
    void* recv = staging->empty() ? nullptr : staging->data();
    return req ? MPI_Igather(in.data, n, dt, recv, n, dt, root, comm, req) : MPI_Gather(in.data, n, dt, recv, n, dt, root, comm);
  }, copy_out(staging, list));
}

Work MpiDist::all_gather(std::span<const TensorView> list, TensorView in, const Group& g, CollectiveOptions o) {
  const Comm* c = comm_of(g);
  if (!c) return completed_work(&exec_, true, "all_gather: not a member");
  const MPI_Datatype dt = moved_datatype(rank_, "all_gather", in.dtype);
  const int n = count_of(in);
  auto staging = std::make_shared<std::vector<std::byte>>(in.bytes() * c->members->size());
  return run("all_gather", *c, o.async_op, [=, comm = c->comm](MPI_Request* req) {
    return req ? MPI_Iallgather(in.data, n, dt, staging->data(), n, dt, comm, req)
               : MPI_Allgather(in.data, n, dt, staging->data(), n, dt, comm);
  }, copy_out(staging, list));
}

Work MpiDist::all_gather_into_tensor(TensorView out, TensorView in, const Group& g, CollectiveOptions o) {
  const Comm* c = comm_of(g);
  if (!c) return completed_work(&exec_, true, "all_gather_into_tensor: not a member");
  const MPI_Datatype dt = moved_datatype(rank_, "all_gather_into_tensor", in.dtype);
  const int n = count_of(in);
  if (out.bytes() != in.bytes() * c->members->size())
    throw Error(ErrorKind::kInvalidArgument, OpContext{rank_, "all_gather_into_tensor", "", -1, {}},
                "the output holds " + std::to_string(out.count) + " elements, not group size x " + std::to_string(in.count));
  return run("all_gather_into_tensor", *c, o.async_op, [=, comm = c->comm](MPI_Request* req) {
    return req ? MPI_Iallgather(in.data, n, dt, out.data, n, dt, comm, req) : MPI_Allgather(in.data, n, dt, out.data, n, dt, comm);
  });
}

Work MpiDist::reduce_scatter(TensorView out, std::span<const TensorView> list, ReduceOp op, const Group& g,
                             CollectiveOptions o) {
  const Comm* c = comm_of(g);
  if (!c) return completed_work(&exec_, true, "reduce_scatter: not a member");
  if (list.size() != c->members->size())
    throw Error(ErrorKind::kInvalidArgument, OpContext{rank_, "reduce_scatter", "", -1, {}},
                "input_list has " + std::to_string(list.size()) + " tensors, not the group's " +
                    std::to_string(c->members->size()));
  for (const TensorView& t : list)
    if (t.dtype != out.dtype || t.count != out.count)
      throw Error(ErrorKind::kInvalidArgument, OpContext{rank_, "reduce_scatter", "", -1, {}},
                  "an input_list entry differs from the output in dtype or count");
  const MPI_Datatype dt = datatype(rank_, "reduce_scatter", out.dtype);
  const MPI_Op mop = reduction(rank_, "reduce_scatter", op, out.dtype);
  const int n = count_of(out);
  auto staging = std::make_shared<std::vector<std::byte>>();
  for (const TensorView& t : list) staging->insert(staging->end(), t.byte_data(), t.byte_data() + t.bytes());
  return run("reduce_scatter", *c, o.async_op, [=, comm = c->comm](MPI_Request* req) {
    return req ? MPI_Ireduce_scatter_block(staging->data(), out.data, n, dt, mop, comm, req)
               : MPI_Reduce_scatter_block(staging->data(), out.data, n, dt, mop, comm);
  }, [staging] {});
}

Work MpiDist::reduce_scatter_tensor(TensorView out, TensorView in, ReduceOp op, const Group& g, CollectiveOptions o) {
  const Comm* c = comm_of(g);
  if (!c) return completed_work(&exec_, true, "reduce_scatter_tensor: not a member");
  if (in.dtype != out.dtype || in.count != out.count * c->members->size())
    throw Error(ErrorKind::kInvalidArgument, OpContext{rank_, "reduce_scatter_tensor", "", -1, {}},
                "the input holds " + std::to_string(in.count) + " elements, not group size x " +
                    std::to_string(out.count));
  const MPI_Datatype dt = datatype(rank_, "reduce_scatter_tensor", out.dtype);
  const MPI_Op mop = reduction(rank_, "reduce_scatter_tensor", op, out.dtype);
  const int n = count_of(out);
  return run("reduce_scatter_tensor", *c, o.async_op, [=, comm = c->comm](MPI_Request* req) {
    return req ? MPI_Ireduce_scatter_block(in.data, out.data, n, dt, mop, comm, req)
               : MPI_Reduce_scatter_block(in.data, out.data, n, dt, mop, comm);
  });
}

namespace {

// MPI_Alltoallv's arguments for blocks laid end to end: counts and
// displacements in elements.
struct Layout {
  std::vector<int> counts, displs;
};

Layout layout_of(int rank, const char* op, const std::vector<TensorView>& blocks) {
  Layout l;
  std::size_t at = 0;
  for (const TensorView& b : blocks) {
    if (at > static_cast<std::size_t>(INT32_MAX))
      unsupported(rank, op, "a displacement above 2^31 - 1 elements (MPI counts are int)");
    l.counts.push_back(count_of(b));
    l.displs.push_back(static_cast<int>(at));
    at += b.count;
  }
  return l;
}

}  // namespace

Work MpiDist::all_to_all(std::span<const TensorView> out, std::span<const TensorView> in, const Group& g,
                         CollectiveOptions o) {
  const Comm* c = comm_of(g);
  if (!c) return completed_work(&exec_, true, "all_to_all: not a member");
  const std::size_t n = c->members->size();
  if (out.size() != n || in.size() != n)
    throw Error(ErrorKind::kInvalidArgument, OpContext{rank_, "all_to_all", "", -1, {}},
                "output_list and input_list need " + std::to_string(n) + " tensors each (the group's size), not " +
                    std::to_string(out.size()) + " and " + std::to_string(in.size()));
  const DType dtype = in[0].dtype;
  for (const auto* list : {&out, &in})
    for (const TensorView& t : *list)
      if (t.dtype != dtype)
        throw Error(ErrorKind::kInvalidArgument, OpContext{rank_, "all_to_all", "", -1, {}},
                    "the lists' tensors differ in dtype");
  const MPI_Datatype dt = moved_datatype(rank_, "all_to_all", dtype);
  const std::vector<TensorView> outs(out.begin(), out.end()), ins(in.begin(), in.end());
  auto send = std::make_shared<Layout>(layout_of(rank_, "all_to_all", ins));
  auto recv = std::make_shared<Layout>(layout_of(rank_, "all_to_all", outs));
  auto send_staging = std::make_shared<std::vector<std::byte>>();
  for (const TensorView& t : ins) send_staging->insert(send_staging->end(), t.byte_data(), t.byte_data() + t.bytes());
  std::size_t recv_bytes = 0;
  for (const TensorView& t : outs) recv_bytes += t.bytes();
  auto recv_staging = std::make_shared<std::vector<std::byte>>(recv_bytes);
  auto finish = copy_out(recv_staging, out);
  return run("all_to_all", *c, o.async_op, [=, comm = c->comm](MPI_Request* req) {
    return req ? MPI_Ialltoallv(send_staging->data(), send->counts.data(), send->displs.data(), dt,
                                recv_staging->data(), recv->counts.data(), recv->displs.data(), dt, comm, req)
               : MPI_Alltoallv(send_staging->data(), send->counts.data(), send->displs.data(), dt,
                               recv_staging->data(), recv->counts.data(), recv->displs.data(), dt, comm);
  }, [finish, send, recv, send_staging] { finish(); });
}

Work MpiDist::all_to_all_single(TensorView out, TensorView in, std::span<const std::size_t> out_splits,
                                std::span<const std::size_t> in_splits, const Group& g, CollectiveOptions o) {
  const Comm* c = comm_of(g);
  if (!c) return completed_work(&exec_, true, "all_to_all_single: not a member");
  const std::size_t n = c->members->size();
  std::shared_ptr<Layout> send, recv;
  try {
    const std::string name = g.is_world_default() ? "world" : "the group";
    send = std::make_shared<Layout>(layout_of(rank_, "all_to_all_single", split_blocks(in, in_splits, n, "input", name)));
    recv = std::make_shared<Layout>(
        layout_of(rank_, "all_to_all_single", split_blocks(out, out_splits, n, "output", name)));
  } catch (const std::invalid_argument& e) {
    throw Error(ErrorKind::kInvalidArgument, OpContext{rank_, "all_to_all_single", "", -1, {}}, e.what());
  }
  if (in.dtype != out.dtype)
    throw Error(ErrorKind::kInvalidArgument, OpContext{rank_, "all_to_all_single", "", -1, {}},
                "the input and output differ in dtype");
  const MPI_Datatype dt = moved_datatype(rank_, "all_to_all_single", in.dtype);
  if (in_splits.empty() && out_splits.empty()) {
    // Equal blocks: MPI_Alltoall, as torch's MPI backend calls it (a
    // library wrong in MPI_Alltoall alone is then seen; uneven blocks and
    // the list form go through MPI_Alltoallv).
    const int block = static_cast<int>(send->counts.empty() ? 0 : send->counts[0]);
    return run("all_to_all_single", *c, o.async_op, [=, comm = c->comm](MPI_Request* req) {
      return req ? MPI_Ialltoall(in.data, block, dt, out.data, block, dt, comm, req)
                 : MPI_Alltoall(in.data, block, dt, out.data, block, dt, comm);
    }, [send, recv] {});
  }
  return run("all_to_all_single", *c, o.async_op, [=, comm = c->comm](MPI_Request* req) {
    return req ? MPI_Ialltoallv(in.data, send->counts.data(), send->displs.data(), dt, out.data, recv->counts.data(),
                                recv->displs.data(), dt, comm, req)
               : MPI_Alltoallv(in.data, send->counts.data(), send->displs.data(), dt, out.data, recv->counts.data(),
                               recv->displs.data(), dt, comm);
  }, [send, recv] {});
}

Work MpiDist::barrier(const Group& g, CollectiveOptions o) {
  const Comm* c = comm_of(g);
  if (!c) return completed_work(&exec_, true, "barrier: not a member");
  return run("barrier", *c, o.async_op, [comm = c->comm](MPI_Request* req) {
    return req ? MPI_Ibarrier(comm, req) : MPI_Barrier(comm);
  });
}

// monitored_barrier over MPI point-to-point, as torch's Gloo backend does
// it over its own: on a duplicate of the group's communicator (nothing of
// the program's can match), with the barrier's number as the tag (a late
// arrival cannot pass a later barrier), polling until the deadline. It
// blocks: MPI has no monitored barrier to wait for asynchronously.
Work MpiDist::monitored_barrier(const Group& g, Nanos timeout_ns, bool wait_all_ranks) {
  const Comm* found = comm_of(g);
  if (!found) return completed_work(&exec_, true, "monitored_barrier: not a member");
  Comm& c = comms_.at(g.is_world_default() ? 0 : g.state()->id);
  const GroupState& gs = *(g.is_world_default() ? world_group_.state() : g.state());
  const Nanos timeout = timeout_ns > 0 ? timeout_ns : gs.timeout_ns;
  const std::uint64_t number = ++c.monitored;
  const int tag = static_cast<int>(number % 32768);  // MPI guarantees tags up to 32767
  const int n = static_cast<int>(c.members->size());
  const int me = group_rank_of(*c.members, rank_);
  const Nanos deadline = timeout > 0 ? exec_.now() + timeout : 0;
  static std::byte token{};
  // Waits for `reqs` until the deadline: true when every one completed;
  // else those still open (left non-null) are cancelled and freed.
  auto wait = [&](std::vector<MPI_Request>& reqs, std::vector<bool>& open) {
    std::vector<int> done(reqs.size());
    for (;;) {
      int count = 0;
      MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &count, done.data(), MPI_STATUSES_IGNORE);
      if (count == MPI_UNDEFINED) return true;  // every request is complete
      if (deadline && exec_.now() >= deadline) {
        for (std::size_t k = 0; k < reqs.size(); ++k) {
          open[k] = reqs[k] != MPI_REQUEST_NULL;
          if (!open[k]) continue;
          MPI_Cancel(&reqs[k]);
          MPI_Request_free(&reqs[k]);
        }
        return false;
      }
      std::this_thread::yield();
    }
  };
  auto finished = [&](std::exception_ptr err) {
    auto w = std::allocate_shared<WorkState>(PoolAllocator<WorkState>{});
    w->executor = &exec_;
    w->finish(std::move(err));
    return Work(w);
  };
  const std::string within = " within " + std::to_string(timeout / 1'000'000) + " ms";
  auto timed_out = [&](std::vector<int> ranks, const std::string& what) {
    return finished(std::make_exception_ptr(Error(
        ErrorKind::kTimeout,
        OpContext{rank_, "monitored_barrier", gs.name, static_cast<std::int64_t>(number), std::move(ranks)}, what)));
  };
  if (me == 0) {
    std::vector<MPI_Request> arrivals(static_cast<std::size_t>(std::max(n - 1, 0)), MPI_REQUEST_NULL);
    std::vector<bool> missing(arrivals.size());
    for (int r = 1; r < n; ++r)
      MPI_Irecv(&token, 0, MPI_BYTE, r, tag, c.monitor, &arrivals[static_cast<std::size_t>(r - 1)]);
    if (!wait(arrivals, missing)) {
      // As torch: the first member that did not arrive, or every one.
      std::vector<int> ranks;
      std::string names;
      for (std::size_t k = 0; k < missing.size(); ++k) {
        if (!missing[k] || (!wait_all_ranks && !ranks.empty())) continue;
        ranks.push_back((*c.members)[k + 1]);
        names += (names.empty() ? "" : ", ") + std::to_string(ranks.back());
      }
      return timed_out(ranks, (ranks.size() == 1 ? "rank " : "ranks ") + names + " did not arrive" + within);
    }
    std::vector<MPI_Request> releases(arrivals.size(), MPI_REQUEST_NULL);
    for (int r = 1; r < n; ++r)
      MPI_Isend(&token, 0, MPI_BYTE, r, tag, c.monitor, &releases[static_cast<std::size_t>(r - 1)]);
    MPI_Waitall(static_cast<int>(releases.size()), releases.data(), MPI_STATUSES_IGNORE);
    return finished(nullptr);
  }
  std::vector<MPI_Request> arrive(1, MPI_REQUEST_NULL), release(1, MPI_REQUEST_NULL);
  std::vector<bool> open(1);
  MPI_Isend(&token, 0, MPI_BYTE, 0, tag, c.monitor, &arrive[0]);
  MPI_Irecv(&token, 0, MPI_BYTE, 0, tag, c.monitor, &release[0]);
  if (!wait(release, open)) {
    MPI_Request_free(&arrive[0]);
    const int monitor = (*c.members)[0];
    return timed_out({monitor}, "rank " + std::to_string(monitor) +
                                    " (the monitor, the group's first member) did not release this rank" + within);
  }
  MPI_Wait(&arrive[0], MPI_STATUS_IGNORE);
  return finished(nullptr);
}

}  // namespace collie::mpi
