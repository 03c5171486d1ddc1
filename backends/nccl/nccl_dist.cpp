#include "backends/nccl/nccl_dist.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/error.h"
#include "core/group.h"

namespace collie::nccl {

namespace {

std::string cuda_words(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw LibraryError(std::string(what) + ": " + cuda_words(e));
}

[[noreturn]] void unsupported(const OpContext& ctx, const std::string& why) {
  throw Error(ErrorKind::kUnsupported, ctx, why);
}

std::optional<ncclDataType_t> nccl_type(DType t) {
  switch (t) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat64: return ncclFloat64;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kInt8: return ncclInt8;
    case DType::kUInt8: return ncclUint8;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    case DType::kBool: return ncclUint8;
  }
  return std::nullopt;
}

// NCCL's reduction for `r` on `t`, or why there is none.
std::optional<ncclRedOp_t> nccl_op(ReduceOp r, DType t, std::string* why) {
  if (t == DType::kBool) {  // torch's mapping for bool
    switch (r) {
      case ReduceOp::kSum: case ReduceOp::kMax: case ReduceOp::kBor: return ncclMax;
      case ReduceOp::kProduct: case ReduceOp::kMin: case ReduceOp::kBand: return ncclMin;
      case ReduceOp::kBxor: case ReduceOp::kAvg: break;
    }
    *why = "ReduceOp " + std::string(reduce_op_name(r)) + " on bool: NCCL has no such reduction";
    return std::nullopt;
  }
  switch (r) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kProduct: return ncclProd;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kBand: case ReduceOp::kBor: case ReduceOp::kBxor: break;
  }
  *why = "ReduceOp " + std::string(reduce_op_name(r)) + ": NCCL has no bitwise reductions";
  return std::nullopt;
}

// Device buffers by power-of-two size class, kept for the process's life:
// cudaFree synchronises the whole device, which a receive still waiting
// for its sender would turn into a hang.
class DevicePool {
 public:
  std::byte* take(std::size_t bytes) {
    std::size_t cls = 256;
    while (cls < bytes) cls <<= 1;
    auto& free = free_[cls];
    if (!free.empty()) {
      std::byte* p = free.back();
      free.pop_back();
      return p;
    }
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, cls), "cudaMalloc");
    size_of_[static_cast<std::byte*>(p)] = cls;
    return static_cast<std::byte*>(p);
  }
  void give(std::byte* p) { free_[size_of_.at(p)].push_back(p); }

 private:
  std::map<std::size_t, std::vector<std::byte*>> free_;
  std::map<std::byte*, std::size_t> size_of_;
};

DevicePool& pool() {
  static DevicePool* p = new DevicePool;  // outlives every call; the process ends with it
  return *p;
}

// One slot's tensors in one device allocation, in order.
struct Staged {
  std::vector<TensorView> host;
  std::vector<std::size_t> offset;
  std::size_t bytes = 0;
  std::byte* dev = nullptr;

  std::byte* at(std::size_t i) const { return dev + offset[i]; }
  std::size_t count(std::size_t i) const { return host[i].count; }
};

// A call in flight: its staged tensors, its event, the Work it completes.
struct InFlight {
  std::vector<Staged> staged;
  cudaEvent_t done = nullptr;
  std::shared_ptr<WorkState> work;
  int source = -1;
};

}  // namespace

// ---- NcclExecutor ------------------------------------------------------------

void NcclExecutor::watch(cudaEvent_t event, std::function<void()> then) {
  watched_.emplace_back(event, std::move(then));
}

bool NcclExecutor::progress() {
  if (watched_.empty()) return false;
  bool progressed = false;
  for (std::size_t i = 0; i < watched_.size();) {
    if (cudaEventQuery(watched_[i].first) == cudaErrorNotReady) {
      ++i;
      continue;
    }
    auto then = std::move(watched_[i].second);
    watched_.erase(watched_.begin() + static_cast<std::ptrdiff_t>(i));
    then();
    progressed = true;
  }
  // Nothing finished yet: let the GPU (and the other ranks' processes) run.
  if (!progressed) std::this_thread::sleep_for(std::chrono::microseconds(20));
  return true;
}

// ---- NcclDist ----------------------------------------------------------------

NcclDist::NcclDist(int rank, int world, int device)
    : lib_(NcclLibrary::load()), rank_(rank), world_(world), device_(device),
      world_group_(world_group_state(world, rank)) {}

NcclDist::~NcclDist() {
  free_groups();
  if (base_) lib_.CommDestroy(base_);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string NcclDist::make_unique_id() const {
  ncclUniqueId id;
  if (const ncclResult_t r = lib_.GetUniqueId(&id); r != ncclSuccess)
    throw std::runtime_error("ncclGetUniqueId: " + lib_.error(r));
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (char c : id.internal) {
    out += hex[(static_cast<unsigned char>(c) >> 4) & 15];
    out += hex[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

void NcclDist::init(const std::string& unique_id) {
  ncclUniqueId id{};
  if (unique_id.size() != 2 * sizeof id.internal)
    throw std::runtime_error("rank 0's NCCL unique id is " + std::to_string(unique_id.size()) + " hex digits, not " +
                             std::to_string(2 * sizeof id.internal));
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (std::size_t i = 0; i < sizeof id.internal; ++i)
    id.internal[i] = static_cast<char>(nibble(unique_id[2 * i]) << 4 | nibble(unique_id[2 * i + 1]));
  cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  if (const ncclResult_t r = lib_.CommInitRank(&base_, world_, id, rank_); r != ncclSuccess) {
    refused_ = "ncclCommInitRank (rank " + std::to_string(rank_) + " of " + std::to_string(world_) + " on CUDA device " +
               std::to_string(device_) + "): " + lib_.error(r);
    base_ = nullptr;
    return;
  }
  comms_[0] = Comm{base_, false};
}

std::string NcclDist::library_version() const {
  cudaDeviceProp prop{};
  std::string gpu = cudaGetDeviceProperties(&prop, device_) == cudaSuccess ? prop.name : "an unknown GPU";
  return lib_.version() + " on " + gpu;
}

void NcclDist::free_groups() {
  for (auto it = comms_.begin(); it != comms_.end();) {
    if (it->first == 0) {
      ++it;
      continue;
    }
    if (it->second.owned && it->second.comm) lib_.CommDestroy(it->second.comm);
    it = comms_.erase(it);
  }
}

void NcclDist::destroy_group(const Group& g) {
  mark_group_destroyed(g, rank_);
  auto it = comms_.find(g.state()->id);
  if (it == comms_.end()) return;
  const Comm c = it->second;
  comms_.erase(it);
  if (!c.owned || !c.comm) return;
  if (const ncclResult_t r = lib_.CommDestroy(c.comm); r != ncclSuccess)
    throw LibraryError("rank " + std::to_string(rank_) + ": destroy_group of " + g.name() +
                       ": ncclCommDestroy: " + lib_.error(r));
}

Group NcclDist::new_group(std::vector<int> ranks, Nanos timeout_ns, std::string name) {
  ranks = new_group_members(std::move(ranks), world_, rank_);
  auto g = new_group_state(++groups_, ranks, rank_, timeout_ns, std::move(name));
  Comm c;
  if (refused_) {
    // Every op fails kUnsupported with NCCL's refusal; the group is a name only.
  } else if (static_cast<int>(ranks.size()) == world_) {
    c.comm = base_;
  } else if (!lib_.CommSplit) {
    throw Error(ErrorKind::kUnsupported, OpContext{rank_, "new_group", g->name, -1, {}},
                "this NCCL has no ncclCommSplit (NCCL 2.18 or later makes groups)");
  } else {
    // Every rank of the world calls it (the controller sends new_group to all).
    ncclComm_t split = nullptr;
    const int color = g->my_rank >= 0 ? 0 : NCCL_SPLIT_NOCOLOR;
    if (const ncclResult_t r = lib_.CommSplit(base_, color, rank_, &split, nullptr); r != ncclSuccess)
      throw LibraryError("rank " + std::to_string(rank_) + ": new_group: ncclCommSplit: " + lib_.error(r));
    c = Comm{split, split != nullptr};
  }
  comms_[g->id] = c;
  return Group(std::move(g));
}

ncclComm_t NcclDist::comm_of(const Group& g) const {
  const int id = g.is_world_default() ? 0 : g.state()->id;
  const auto it = comms_.find(id);
  if (it == comms_.end()) return nullptr;
  if (!g.is_world_default() && !g.is_member()) return nullptr;
  return it->second.comm;
}

Work NcclDist::call(DistCall c) {
  const Group g = c.group.is_world_default() ? world_group_ : c.group;
  const std::string op(c.name());
  const OpContext ctx{rank_, op, g.name(), -1, {}};
  if (refused_) unsupported(ctx, "NCCL refuses this world: " + *refused_);
  if (!g.is_member()) return completed_work(&exec_, true, op + ": not a member");
  const ncclComm_t comm = comm_of(g);
  if (!comm) throw Error(ErrorKind::kInvalidArgument, ctx, "a group this rank never made");
  if (c.kind == OpKind::kMonitoredBarrier)
    unsupported(ctx, "NCCL has no monitored_barrier (torch offers it on Gloo only)");
  if (c.spec().any_source && c.peer == kAnySource) unsupported(ctx, "NCCL has no any-source receive");
  if (c.spec().tag && c.tag != 0) unsupported(ctx, "NCCL has no tags (tag " + std::to_string(c.tag) + ")");
  for (const P2POp& p : c.p2p) {
    if (p.tag != 0) unsupported(ctx, "NCCL has no tags (tag " + std::to_string(p.tag) + ")");
    if (p.peer == kAnySource) unsupported(ctx, "NCCL has no any-source receive");
  }
  auto peer_rank = [&](int global) {
    const int r = g.group_rank_of(global);
    if (r < 0)
      throw Error(ErrorKind::kInvalidArgument, OpContext{rank_, op, g.name(), -1, {global}},
                  "rank " + std::to_string(global) + " is not in the group");
    return r;
  };

  // Stage every slot (and each op of a batch) to the device.
  std::vector<Staged> slots(kNumSlots + c.p2p.size());
  DType dtype = DType::kUInt8;
  bool typed = false;
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    if (!c.spec().operand(static_cast<Slot>(k)).present()) continue;
    slots[k].host = c.views(static_cast<Slot>(k));
  }
  for (std::size_t i = 0; i < c.p2p.size(); ++i) slots[kNumSlots + i].host = {c.p2p[i].tensor};
  for (Staged& s : slots)
    for (const TensorView& v : s.host) {
      if (typed && v.dtype != dtype)
        throw Error(ErrorKind::kInvalidArgument, ctx, "tensors of different dtypes in one call");
      dtype = v.dtype;
      typed = true;
    }
  const std::optional<ncclDataType_t> dt = nccl_type(dtype);
  if (!dt) unsupported(ctx, "dtype " + std::string(dtype_name(dtype)) + ": NCCL has no such type");
  ncclRedOp_t red = ncclSum;
  if (c.spec().reduce_op) {
    std::string why;
    const auto r = nccl_op(c.reduce_op, dtype, &why);
    if (!r) unsupported(ctx, why);
    red = *r;
  }

  auto flight = std::make_shared<InFlight>();
  for (Staged& s : slots) {
    for (const TensorView& v : s.host) {
      s.offset.push_back(s.bytes);
      s.bytes += (v.bytes() + 255) / 256 * 256;
    }
    if (s.bytes == 0) continue;
    s.dev = pool().take(s.bytes);
    for (std::size_t i = 0; i < s.host.size(); ++i)
      if (s.host[i].bytes())
        cuda_check(cudaMemcpyAsync(s.at(i), s.host[i].data, s.host[i].bytes(), cudaMemcpyHostToDevice, stream_),
                   "cudaMemcpyAsync (host to device)");
  }
  const Staged& T = slots[static_cast<std::size_t>(Slot::kTensor)];
  const Staged& L = slots[static_cast<std::size_t>(Slot::kList)];
  const Staged& O = slots[static_cast<std::size_t>(Slot::kOutput)];
  const int n = g.size();
  const int me = g.rank();

  auto check = [&](ncclResult_t r, const char* call) {
    if (r != ncclSuccess) throw LibraryError("rank " + std::to_string(rank_) + ": " + op + ": " + call + ": " + lib_.error(r));
  };
  auto same_counts = [&](const Staged& list, std::size_t count, const char* what) {
    for (std::size_t i = 0; i < list.host.size(); ++i)
      if (list.count(i) != count)
        throw Error(ErrorKind::kInvalidArgument, ctx,
                    std::string(what) + " " + std::to_string(i) + " has " + std::to_string(list.count(i)) +
                        " elements, not " + std::to_string(count) + " (NCCL moves equal blocks)");
    if (static_cast<int>(list.host.size()) != n)
      throw Error(ErrorKind::kInvalidArgument, ctx,
                  std::string(what) + "s: " + std::to_string(list.host.size()) + ", not the group's " +
                      std::to_string(n));
  };
  const std::size_t es = dtype_size(dtype);
  int source = -1;
  try {
    switch (c.kind) {
      case OpKind::kSend:
        check(lib_.Send(T.at(0), T.count(0), *dt, peer_rank(c.peer), comm, stream_), "ncclSend");
        break;
      case OpKind::kRecv:
        check(lib_.Recv(T.at(0), T.count(0), *dt, peer_rank(c.peer), comm, stream_), "ncclRecv");
        source = c.peer;
        break;
      case OpKind::kBatchIsendIrecv:
        check(lib_.GroupStart(), "ncclGroupStart");
        for (std::size_t i = 0; i < c.p2p.size(); ++i) {
          const Staged& s = slots[kNumSlots + i];
          const P2POp& p = c.p2p[i];
          check(p.is_send ? lib_.Send(s.at(0), s.count(0), *dt, peer_rank(p.peer), comm, stream_)
                          : lib_.Recv(s.at(0), s.count(0), *dt, peer_rank(p.peer), comm, stream_),
                p.is_send ? "ncclSend" : "ncclRecv");
        }
        check(lib_.GroupEnd(), "ncclGroupEnd");
        break;
      case OpKind::kBroadcast:
        check(lib_.Broadcast(T.at(0), T.at(0), T.count(0), *dt, peer_rank(c.peer), comm, stream_), "ncclBroadcast");
        break;
      case OpKind::kReduce:
        check(lib_.Reduce(T.at(0), T.at(0), T.count(0), *dt, red, peer_rank(c.peer), comm, stream_), "ncclReduce");
        break;
      case OpKind::kAllReduce:
        check(lib_.AllReduce(T.at(0), T.at(0), T.count(0), *dt, red, comm, stream_), "ncclAllReduce");
        break;
      case OpKind::kBarrier: {
        std::byte* one = pool().take(1);
        check(lib_.AllReduce(one, one, 1, ncclUint8, ncclSum, comm, stream_), "ncclAllReduce (barrier)");
        Staged s;
        s.dev = one;
        slots.push_back(s);  // given back with the rest
        break;
      }
      case OpKind::kAllGather:  // list: the outputs, contiguous
        same_counts(L, T.count(0), "output tensor");
        check(lib_.AllGather(T.at(0), L.dev, T.count(0), *dt, comm, stream_), "ncclAllGather");
        break;
      case OpKind::kAllGatherIntoTensor:
        if (O.count(0) != T.count(0) * static_cast<std::size_t>(n))
          throw Error(ErrorKind::kInvalidArgument, ctx, "the output is not group size x the input");
        check(lib_.AllGather(T.at(0), O.at(0), T.count(0), *dt, comm, stream_), "ncclAllGather");
        break;
      case OpKind::kReduceScatter:  // list: the inputs, contiguous
        same_counts(L, O.count(0), "input tensor");
        check(lib_.ReduceScatter(L.dev, O.at(0), O.count(0), *dt, red, comm, stream_), "ncclReduceScatter");
        break;
      case OpKind::kReduceScatterTensor:
        if (T.count(0) != O.count(0) * static_cast<std::size_t>(n))
          throw Error(ErrorKind::kInvalidArgument, ctx, "the input is not group size x the output");
        check(lib_.ReduceScatter(T.at(0), O.at(0), O.count(0), *dt, red, comm, stream_), "ncclReduceScatter");
        break;
      case OpKind::kScatter: {  // tensor: this rank's output; list: the root's inputs
        const int root = peer_rank(c.peer);
        if (me == root) same_counts(L, T.count(0), "input tensor");
        check(lib_.GroupStart(), "ncclGroupStart");
        if (me == root)
          for (int r = 0; r < n; ++r)
            check(lib_.Send(L.at(static_cast<std::size_t>(r)), T.count(0), *dt, r, comm, stream_), "ncclSend");
        check(lib_.Recv(T.at(0), T.count(0), *dt, root, comm, stream_), "ncclRecv");
        check(lib_.GroupEnd(), "ncclGroupEnd");
        break;
      }
      case OpKind::kGather: {  // tensor: this rank's input; list: the root's outputs
        const int root = peer_rank(c.peer);
        if (me == root) same_counts(L, T.count(0), "output tensor");
        check(lib_.GroupStart(), "ncclGroupStart");
        if (me == root)
          for (int r = 0; r < n; ++r)
            check(lib_.Recv(L.at(static_cast<std::size_t>(r)), T.count(0), *dt, r, comm, stream_), "ncclRecv");
        check(lib_.Send(T.at(0), T.count(0), *dt, root, comm, stream_), "ncclSend");
        check(lib_.GroupEnd(), "ncclGroupEnd");
        break;
      }
      case OpKind::kAllToAll: {  // list: inputs by destination; output list: outputs by source
        if (static_cast<int>(L.host.size()) != n || static_cast<int>(O.host.size()) != n)
          throw Error(ErrorKind::kInvalidArgument, ctx, "all_to_all takes one input and one output per group rank");
        check(lib_.GroupStart(), "ncclGroupStart");
        for (int r = 0; r < n; ++r) {
          const auto i = static_cast<std::size_t>(r);
          check(lib_.Send(L.at(i), L.count(i), *dt, r, comm, stream_), "ncclSend");
          check(lib_.Recv(O.at(i), O.count(i), *dt, r, comm, stream_), "ncclRecv");
        }
        check(lib_.GroupEnd(), "ncclGroupEnd");
        break;
      }
      case OpKind::kAllToAllSingle: {  // tensor: input; output: output; splits in elements
        auto splits = [&](const std::vector<std::size_t>& given, std::size_t total, const char* what) {
          if (!given.empty()) return given;
          if (total % static_cast<std::size_t>(n))
            throw Error(ErrorKind::kInvalidArgument, ctx,
                        std::string(what) + " of " + std::to_string(total) + " elements does not split into " +
                            std::to_string(n) + " equal blocks");
          return std::vector<std::size_t>(static_cast<std::size_t>(n), total / static_cast<std::size_t>(n));
        };
        const auto in = splits(c.input_splits, T.count(0), "the input");
        const auto out = splits(c.output_splits, O.count(0), "the output");
        check(lib_.GroupStart(), "ncclGroupStart");
        std::size_t in_at = 0, out_at = 0;
        for (int r = 0; r < n; ++r) {
          const auto i = static_cast<std::size_t>(r);
          check(lib_.Send(T.at(0) + in_at * es, in[i], *dt, r, comm, stream_), "ncclSend");
          check(lib_.Recv(O.at(0) + out_at * es, out[i], *dt, r, comm, stream_), "ncclRecv");
          in_at += in[i];
          out_at += out[i];
        }
        check(lib_.GroupEnd(), "ncclGroupEnd");
        break;
      }
      case OpKind::kMonitoredBarrier:
        break;  // refused above
    }
  } catch (...) {
    for (Staged& s : slots)
      if (s.dev) pool().give(s.dev);  // nothing was queued that reads them, or the stream is lost anyway
    throw;
  }

  cuda_check(cudaEventCreateWithFlags(&flight->done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  cuda_check(cudaEventRecord(flight->done, stream_), "cudaEventRecord");
  auto w = std::make_shared<WorkState>();
  w->executor = &exec_;
  flight->work = w;
  flight->source = source;
  flight->staged = std::move(slots);
  const int rank = rank_;
  exec_.watch(flight->done, [flight, rank, op] {
    std::exception_ptr err;
    if (const cudaError_t e = cudaEventQuery(flight->done); e != cudaSuccess) {
      err = std::make_exception_ptr(LibraryError("rank " + std::to_string(rank) + ": " + op + ": " + cuda_words(e)));
    } else {
      // The call has completed: its results are on the device. Copy every
      // tensor back (pageable memory, the legacy stream: the rank's stream,
      // created non-blocking, is not waited for).
      try {
        for (const Staged& s : flight->staged)
          for (std::size_t i = 0; i < s.host.size(); ++i)
            if (s.host[i].bytes())
              cuda_check(cudaMemcpy(s.host[i].data, s.at(i), s.host[i].bytes(), cudaMemcpyDeviceToHost),
                         "cudaMemcpy (device to host)");
      } catch (...) {
        err = std::current_exception();
      }
    }
    cudaEventDestroy(flight->done);
    for (const Staged& s : flight->staged)
      if (s.dev) pool().give(s.dev);
    flight->work->source = flight->source;
    flight->work->finish(err);
  });
  return Work(w);
}

}  // namespace collie::nccl
