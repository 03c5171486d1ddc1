#include "conformance/collective_check.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <sstream>

#include "conformance/reference.h"
#include "core/communicator.h"
#include "sim/prng.h"

namespace collie::conformance {

std::string CollectiveCase::describe() const {
  std::ostringstream os;
  os << collective_name(op) << "(" << dtype_name(dtype) << " x " << count;
  if (op == CollectiveKind::kReduce || op == CollectiveKind::kAllReduce) os << ", " << reduce_op_name(reduce_op);
  if (op == CollectiveKind::kBroadcast || op == CollectiveKind::kReduce || op == CollectiveKind::kScatter ||
      op == CollectiveKind::kGather)
    os << ", root " << root;
  os << ", " << algorithm_name(algorithm) << ") on ";
  if (group.empty()) {
    os << "world";
  } else {
    std::vector<int> g = group;
    std::sort(g.begin(), g.end());
    os << "{";
    for (std::size_t i = 0; i < g.size(); ++i) os << (i ? "," : "") << g[i];
    os << "}";
  }
  os << " data_seed " << data_seed;
  return os.str();
}

void fill_inputs(Tensor& t, const CollectiveCase& c, int group_rank, int list_index) {
  for (std::size_t i = 0; i < t.count(); ++i) {
    std::uint64_t x = c.data_seed * 0x9e3779b97f4a7c15ull ^ (static_cast<std::uint64_t>(group_rank) << 40) ^
                      (static_cast<std::uint64_t>(list_index + 1) << 52) ^ i;
    const std::uint64_t h = sim::Prng::splitmix64(x);
    if (t.dtype() == DType::kBool) {
      t.set(i, static_cast<double>(h & 1));
    } else if (is_floating(t.dtype())) {
      if (c.reduce_op == ReduceOp::kProduct && c.op != CollectiveKind::kBroadcast) {
        static constexpr double kFactors[4] = {-2, -1, 1, 2};
        t.set(i, kFactors[h & 3]);
      } else {
        t.set(i, static_cast<double>(static_cast<int>(h % 17) - 8));
      }
    } else {
      t.set_int(i, static_cast<std::int64_t>(h));
    }
  }
}

namespace {

constexpr double kSentinel = 77;  // what output buffers hold before an op writes them

Tensor make(const CollectiveCase& c) { return Tensor(c.dtype, {static_cast<std::int64_t>(c.count)}); }

Tensor sentinel(const CollectiveCase& c) {
  Tensor t = make(c);
  for (std::size_t i = 0; i < t.count(); ++i) t.set(i, kSentinel);
  return t;
}

std::string first_difference(const Tensor& got, const Tensor& want) {
  if (got.count() != want.count()) return "count " + std::to_string(got.count()) + " != " + std::to_string(want.count());
  const std::size_t es = dtype_size(got.dtype());
  for (std::size_t i = 0; i < got.count(); ++i) {
    if (std::memcmp(static_cast<const std::byte*>(got.data()) + i * es,
                    static_cast<const std::byte*>(want.data()) + i * es, es) != 0) {
      return "element " + std::to_string(i) + " is " + format_scalar(got.dtype(), got.get(i)) + ", expected " +
             format_scalar(want.dtype(), want.get(i));
    }
  }
  return {};
}

// Per-case state: the buffers every rank hands to the op, and what the oracle expects of them.
struct CaseState {
  CollectiveCase c;
  std::vector<int> members;                  // sorted global ranks
  std::vector<int> group_rank;               // by global rank, -1 outside
  std::vector<Tensor> tensor;                // by global rank: in/out tensor
  std::vector<std::vector<Tensor>> list;     // by global rank: scatter/gather/all_gather lists
  std::vector<Tensor> want_tensor;           // by global rank
  std::vector<std::vector<Tensor>> want_list;
};

CaseState prepare(const CollectiveCase& c, int world) {
  CaseState s;
  s.c = c;
  if (c.group.empty()) {
    for (int r = 0; r < world; ++r) s.members.push_back(r);
  } else {
    s.members = c.group;
    std::sort(s.members.begin(), s.members.end());
  }
  const auto W = static_cast<std::size_t>(world);
  const int n = static_cast<int>(s.members.size());
  s.group_rank.assign(W, -1);
  for (int i = 0; i < n; ++i) s.group_rank[static_cast<std::size_t>(s.members[static_cast<std::size_t>(i)])] = i;
  s.list.resize(W);
  s.want_list.resize(W);
  const int root_g = s.group_rank[static_cast<std::size_t>(std::clamp(c.root, 0, world - 1))];

  std::vector<Tensor> inputs;  // by group rank
  for (int i = 0; i < n; ++i) {
    Tensor t = make(c);
    fill_inputs(t, c, i, -1);
    inputs.push_back(std::move(t));
  }
  for (int r = 0; r < world; ++r) {
    const int g = s.group_rank[static_cast<std::size_t>(r)];
    if (g < 0 || c.op == CollectiveKind::kScatter) {
      s.tensor.push_back(sentinel(c));
    } else {
      s.tensor.push_back(reference::clone(inputs[static_cast<std::size_t>(g)]));
    }
  }
  // Expected values default to "unchanged".
  for (int r = 0; r < world; ++r) s.want_tensor.push_back(reference::clone(s.tensor[static_cast<std::size_t>(r)]));

  auto at = [&](int g) { return static_cast<std::size_t>(s.members[static_cast<std::size_t>(g)]); };
  switch (c.op) {
    case CollectiveKind::kBroadcast: {
      auto out = reference::broadcast(inputs, root_g);
      for (int g = 0; g < n; ++g) s.want_tensor[at(g)] = std::move(out[static_cast<std::size_t>(g)]);
      break;
    }
    case CollectiveKind::kReduce: {
      auto out = reference::reduce(inputs, root_g, c.reduce_op);
      for (int g = 0; g < n; ++g) s.want_tensor[at(g)] = std::move(out[static_cast<std::size_t>(g)]);
      break;
    }
    case CollectiveKind::kAllReduce: {
      auto out = reference::all_reduce(inputs, c.reduce_op);
      for (int g = 0; g < n; ++g) s.want_tensor[at(g)] = std::move(out[static_cast<std::size_t>(g)]);
      break;
    }
    case CollectiveKind::kScatter: {
      std::vector<Tensor> root_list;
      for (int i = 0; i < n; ++i) {
        Tensor t = make(c);
        fill_inputs(t, c, root_g, i);
        root_list.push_back(std::move(t));
      }
      auto out = reference::scatter(root_list);
      for (int g = 0; g < n; ++g) s.want_tensor[at(g)] = std::move(out[static_cast<std::size_t>(g)]);
      s.list[at(root_g)] = std::move(root_list);
      for (const Tensor& t : s.list[at(root_g)]) s.want_list[at(root_g)].push_back(reference::clone(t));
      break;
    }
    case CollectiveKind::kGather: {
      auto out = reference::gather(inputs, root_g);
      for (int i = 0; i < n; ++i) s.list[at(root_g)].push_back(sentinel(c));
      s.want_list[at(root_g)] = std::move(out[static_cast<std::size_t>(root_g)]);
      break;
    }
    case CollectiveKind::kAllGather: {
      auto out = reference::all_gather(inputs);
      for (int g = 0; g < n; ++g) {
        for (int i = 0; i < n; ++i) s.list[at(g)].push_back(sentinel(c));
        s.want_list[at(g)] = std::move(out[static_cast<std::size_t>(g)]);
      }
      break;
    }
    case CollectiveKind::kBarrier:
    case CollectiveKind::kNone:
      break;
  }
  return s;
}

Work issue(Communicator& comm, CaseState& s, const Group& g) {
  const auto r = static_cast<std::size_t>(comm.rank());
  const CollectiveCase& c = s.c;
  CollectiveOptions o{c.algorithm};
  std::vector<TensorView> views;
  for (Tensor& t : s.list[r]) views.push_back(t.view());
  TensorView t = s.tensor[r].view();
  switch (c.op) {
    case CollectiveKind::kBroadcast: return comm.broadcast(t, c.root, g, o);
    case CollectiveKind::kReduce: return comm.reduce(t, c.root, c.reduce_op, g, o);
    case CollectiveKind::kAllReduce: return comm.all_reduce(t, c.reduce_op, g, o);
    case CollectiveKind::kScatter: return comm.scatter(t, c.root, views, g, o);
    case CollectiveKind::kGather: return comm.gather(t, c.root, views, g, o);
    case CollectiveKind::kAllGather: return comm.all_gather(views, t, g, o);
    case CollectiveKind::kBarrier: return comm.barrier(g, o);
    case CollectiveKind::kNone: break;
  }
  return Work();
}

}  // namespace

std::string run_and_check(sim::SimWorld& world, const std::vector<CollectiveCase>& cases) {
  return run_and_check(world.world(), cases, "seed " + std::to_string(world.options().seed));
}

std::string run_and_check(LocalWorld& world, const std::vector<CollectiveCase>& cases, const std::string& context) {
  const int W = world.world_size();
  std::vector<CaseState> states;
  for (const CollectiveCase& c : cases) states.push_back(prepare(c, W));

  auto program = [&](Communicator& comm) -> Task<void> {
    std::vector<Group> groups;
    for (const CaseState& s : states) groups.push_back(s.c.group.empty() ? Group() : comm.new_group(s.c.group));
    std::vector<Work> works;
    for (std::size_t k = 0; k < states.size(); ++k) works.push_back(issue(comm, states[k], groups[k]));
    co_await wait_all(works);
  };
  RunResult res = world.run(program, context);
  if (!res.ok()) return "run failed" + (context.empty() ? "" : " (" + context + ")") + ": " + res.describe();

  for (const CaseState& s : states) {
    for (int r = 0; r < W; ++r) {
      const auto ur = static_cast<std::size_t>(r);
      std::string d = first_difference(s.tensor[ur], s.want_tensor[ur]);
      if (!d.empty()) return s.c.describe() + ": rank " + std::to_string(r) + ": tensor " + d;
      if (s.list[ur].size() != s.want_list[ur].size())
        return s.c.describe() + ": rank " + std::to_string(r) + ": list size differs";
      for (std::size_t i = 0; i < s.list[ur].size(); ++i) {
        d = first_difference(s.list[ur][i], s.want_list[ur][i]);
        if (!d.empty()) return s.c.describe() + ": rank " + std::to_string(r) + ": list[" + std::to_string(i) + "] " + d;
      }
    }
    if (s.c.op == CollectiveKind::kAllReduce && !s.members.empty()) {
      const Tensor& first = s.tensor[static_cast<std::size_t>(s.members[0])];
      for (int m : s.members)
        if (!reference::bitwise_equal(first, s.tensor[static_cast<std::size_t>(m)]))
          return s.c.describe() + ": all_reduce results differ between ranks " + std::to_string(s.members[0]) +
                 " and " + std::to_string(m);
    }
  }
  return {};
}

CollectiveCase random_case(CollectiveKind op, int world, sim::Prng& prng) {
  CollectiveCase c;
  c.op = op;
  if (prng.below(2) == 0) {
    for (int r = 0; r < world; ++r)
      if (prng.below(2)) c.group.push_back(r);
    if (c.group.empty()) c.group.push_back(static_cast<int>(prng.below(static_cast<std::uint64_t>(world))));
  }
  c.dtype = static_cast<DType>(prng.below(kNumDTypes));
  std::vector<ReduceOp> ops;
  for (int i = 0; i < kNumReduceOps; ++i)
    if (!reduce_op_unsupported(static_cast<ReduceOp>(i), c.dtype)) ops.push_back(static_cast<ReduceOp>(i));
  c.reduce_op = ops[prng.below(ops.size())];
  static constexpr std::size_t kCounts[] = {0, 1, 2, 3, 5, 7, 13, 31, 61, 127, 257, 1021, 4099};
  c.count = kCounts[prng.below(std::size(kCounts))];
  std::vector<int> members = c.group;
  if (members.empty())
    for (int r = 0; r < world; ++r) members.push_back(r);
  c.root = members[prng.below(members.size())];
  std::vector<Algorithm> algs = algorithms_for(op);
  algs.push_back(Algorithm::kAuto);
  c.algorithm = algs[prng.below(algs.size())];
  c.data_seed = prng.next();
  return c;
}

std::string run_p2p_traffic(LocalWorld& world, sim::Prng& prng, int per_rank, const std::string& context) {
  const int W = world.world_size();
  if (W < 2) return {};
  struct Msg {
    int dst, tag;
    std::size_t count;
    std::int64_t value;
  };
  std::vector<std::vector<Msg>> plan(static_cast<std::size_t>(W));
  for (int r = 0; r < W; ++r)
    for (int i = 0; i < per_rank; ++i) {
      int dst = static_cast<int>(prng.below(static_cast<std::uint64_t>(W - 1)));
      if (dst >= r) ++dst;
      static constexpr std::size_t kSizes[] = {1, 3, 100, 20000};
      plan[static_cast<std::size_t>(r)].push_back(Msg{dst, static_cast<int>(prng.below(3)), kSizes[prng.below(4)],
                                                      r * 1000000 + i});
    }
  std::vector<bool> reverse_tags(static_cast<std::size_t>(W));
  for (auto&& b : reverse_tags) b = prng.below(2) == 1;
  std::string failure;
  auto program = [&](Communicator& c) -> Task<void> {
    const auto me = static_cast<std::size_t>(c.rank());
    std::vector<Tensor> out, in;
    out.reserve(plan[me].size());
    std::vector<Work> works;
    for (const Msg& m : plan[me]) {
      out.emplace_back(DType::kInt64, std::vector<std::int64_t>{static_cast<std::int64_t>(m.count)});
      for (std::size_t k = 0; k < m.count; ++k) out.back().set_int(k, m.value + static_cast<std::int64_t>(k));
      works.push_back(c.isend(out.back(), m.dst, m.tag));
    }
    struct Expect {
      int src, tag;
      std::size_t count;
      std::int64_t value;
    };
    std::vector<Expect> expect;
    for (int s = 0; s < W; ++s)
      for (const Msg& m : plan[static_cast<std::size_t>(s)])
        if (m.dst == c.rank()) expect.push_back(Expect{s, m.tag, m.count, m.value});
    if (reverse_tags[me])
      std::stable_sort(expect.begin(), expect.end(), [](const Expect& a, const Expect& b) { return a.tag > b.tag; });
    in.reserve(expect.size());
    std::vector<Work> recvs;
    for (const Expect& e : expect) {
      in.emplace_back(DType::kInt64, std::vector<std::int64_t>{static_cast<std::int64_t>(e.count)});
      recvs.push_back(c.irecv(in.back(), e.src, e.tag));
    }
    co_await wait_all(recvs);
    for (std::size_t k = 0; k < expect.size() && failure.empty(); ++k)
      for (std::size_t x = 0; x < expect[k].count; ++x)
        if (in[k].get_int(x) != expect[k].value + static_cast<std::int64_t>(x)) {
          failure = "rank " + std::to_string(me) + ": message " + std::to_string(k) + " from rank " +
                    std::to_string(expect[k].src) + " (tag " + std::to_string(expect[k].tag) + ") element " +
                    std::to_string(x) + " is " + std::to_string(in[k].get_int(x)) + ", expected " +
                    std::to_string(expect[k].value + static_cast<std::int64_t>(x)) +
                    " (a message overtook another, or was corrupted)";
          break;
        }
    co_await wait_all(works);
  };
  RunResult res = world.run(program, context);
  if (!res.ok()) return "run failed" + (context.empty() ? "" : " (" + context + ")") + ": " + res.describe();
  return failure;
}

}  // namespace collie::conformance
