#include "tools/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>

#include "core/error.h"
#include "core/op.h"
#include "core/task.h"

namespace collie::tools {

namespace {

// The op a bench name times: a row of core/op.h's table by its name, where
// nccl-tests' names reduce_scatter and all_to_all are the one-tensor forms
// (reduce_scatter_tensor, all_to_all_single), and sendrecv is a ring shift
// (batch_isend_irecv: receive from rank-1, send to rank+1). Point-to-point
// rows are not timed alone.
// When a rank's timed loop starts or ends: the executor's clock, or the
// host's where the backend's clock is logical.
Nanos timestamp(Dist& c, const BenchOptions& o) {
  if (!o.wall_clock) return c.executor().now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::optional<OpKind> bench_op(std::string_view name) {
  if (name == "reduce_scatter") return OpKind::kReduceScatterTensor;
  if (name == "all_to_all") return OpKind::kAllToAllSingle;
  if (name == "sendrecv") return OpKind::kBatchIsendIrecv;
  const auto named = parse_op(name);
  if (!named || named->async || op_spec(named->kind).family != OpFamily::kCollective) return std::nullopt;
  return named->kind;
}

std::string bench_op_list() {
  std::string list;
  for (const OpSpec& s : op_table())
    if (s.family == OpFamily::kCollective) list += (list.empty() ? "" : ", ") + std::string(s.name);
  return list + ", sendrecv";
}

// An op with no tensor (barrier): one row, of no bytes.
bool moves_no_data(OpKind k) {
  return !op_spec(k).operand(Slot::kTensor).present() && !op_spec(k).operand(Slot::kList).present() &&
         op_spec(k).family != OpFamily::kBatch;
}

// The buffer is cut into one chunk per rank: nccl-tests' size is the whole
// buffer. That is any op with a list or a tensor of blocks.
bool is_chunked(OpKind k) {
  for (const Operand& o : op_spec(k).operands)
    if (o.is_list() || o.blocks) return true;
  return false;
}

[[noreturn]] void usage(const std::string& m) { throw Error(ErrorKind::kUsage, OpContext{}, "bench: " + m); }

// The check's inputs repeat with this period, so the expected result of
// every element is one of kPeriod values, computed once.
constexpr std::size_t kPeriod = 10;

// Rank r's input at element i: small integers, exact in every dtype, and
// bounded for PRODUCT.
double input_value(const BenchOptions& o, int r, std::size_t i) {
  if (o.reduce_op == ReduceOp::kProduct) return 1.0 + static_cast<double>((static_cast<std::size_t>(r) + i) % 2);
  return 1.0 + static_cast<double>((static_cast<std::size_t>(r) * 3 + i) % 5);
}


// The reduction of every rank's input over one period, with the core's own
// host reduction (so float16/bfloat16 round exactly as the backends do).
Tensor expected_reduction(const BenchOptions& o, int n) {
  Tensor acc(o.dtype, {static_cast<std::int64_t>(kPeriod)});
  Tensor in(o.dtype, {static_cast<std::int64_t>(kPeriod)});
  for (int r = 0; r < n; ++r) {
    Tensor& dst = r == 0 ? acc : in;
    for (std::size_t i = 0; i < kPeriod; ++i) dst.set(i, input_value(o, r, i));
    if (r > 0) reduce_host(acc.data(), in.data(), kPeriod, o.dtype, o.reduce_op);
  }
  if (o.reduce_op == ReduceOp::kAvg) finish_average_host(acc.data(), kPeriod, o.dtype, n);
  return acc;
}

// Rank r's input over one period (what a broadcast, gather or scatter moves).
Tensor expected_input(const BenchOptions& o, int r) {
  Tensor t(o.dtype, {static_cast<std::int64_t>(kPeriod)});
  for (std::size_t i = 0; i < kPeriod; ++i) t.set(i, input_value(o, r, i));
  return t;
}

// Elements [begin, begin + len) of `got` whose bytes differ from `want`
// (one period, repeated, element `begin` of `got` at phase `phase` of it).
std::int64_t count_wrong(const TensorView& got, const Tensor& want, std::size_t phase) {
  const std::size_t es = dtype_size(got.dtype);
  const auto* g = static_cast<const std::byte*>(got.data);
  const auto* w = static_cast<const std::byte*>(want.data());
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < got.count; ++i)
    if (std::memcmp(g + i * es, w + ((phase + i) % kPeriod) * es, es) != 0) ++wrong;
  return wrong;
}

// The buffers of one size and the call over them, laid out as core/op.h's
// table says the op takes them: a list of n chunks, a tensor of n chunks
// where the oracle sees blocks, one chunk (or the whole count) otherwise.
struct Buffers {
  std::vector<Tensor> tensors;
  DistCall call;
};

// The tensors of one size on rank `me`, in elements, and how many of them
// each slot takes (in order; a batch's two p2p tensors come last).
struct Layout {
  std::vector<std::uint64_t> tensors;
  std::vector<std::pair<Slot, std::size_t>> slots;
};

Layout layout(OpKind kind, const BenchOptions& o, int n, int me, std::uint64_t count, std::uint64_t chunk) {
  Layout l;
  const OpSpec& spec = op_spec(kind);
  const bool is_root = spec.rooted && me == o.root;
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    const auto slot = static_cast<Slot>(k);
    const Operand& op = spec.operand(slot);
    if (!op.present()) continue;
    const std::size_t first = l.tensors.size();
    if (op.is_list()) {
      if (op.passed_by(is_root)) l.tensors.insert(l.tensors.end(), static_cast<std::size_t>(n), chunk);
    } else {
      l.tensors.push_back(op.blocks ? count : chunk);
    }
    l.slots.emplace_back(slot, l.tensors.size() - first);
  }
  if (spec.family == OpFamily::kBatch) l.tensors.insert(l.tensors.end(), {chunk, chunk});  // sendrecv: [receive, send]
  return l;
}

Buffers make_buffers(OpKind kind, const BenchOptions& o, int n, int me, std::uint64_t count, std::uint64_t chunk) {
  Buffers b;
  DistCall& c = b.call;
  c.kind = kind;
  c.algorithm = o.algorithm;
  c.reduce_op = o.reduce_op;
  const OpSpec& spec = c.spec();
  c.peer = spec.rooted ? o.root : -1;
  const Layout l = layout(kind, o, n, me, count, chunk);
  for (std::uint64_t elements : l.tensors)
    b.tensors.emplace_back(o.dtype, std::vector<std::int64_t>{static_cast<std::int64_t>(elements)});
  const auto& slots = l.slots;
  // Views once the tensors no longer move.
  std::size_t at = 0;
  for (const auto& [slot, k] : slots) {
    std::vector<TensorView> v;
    for (std::size_t i = 0; i < k; ++i) v.push_back(b.tensors[at++].view());
    if (!v.empty() || spec.operand(slot).is_list()) c.set_views(slot, std::move(v));
  }
  if (spec.family == OpFamily::kBatch) {
    c.async = true;
    c.p2p = {P2POp{false, b.tensors[at].view(), (me + n - 1) % n, 7}, P2POp{true, b.tensors[at + 1].view(), (me + 1) % n, 7}};
  }
  return b;
}

// Known inputs in what the call reads: rank r's input_value at element i
// of the whole input (a list's entry j holds elements [j * chunk, ...));
// scatter's list entry j, on the root, holds rank j's.
void fill_inputs(Buffers& b, const BenchOptions& o, int me) {
  const OpSpec& spec = b.call.spec();
  const bool is_root = spec.rooted && me == o.root;
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    const auto slot = static_cast<Slot>(k);
    const Operand& op = spec.operand(slot);
    if (!op.passed_by(is_root)) continue;
    const std::vector<TensorView> v = b.call.views(slot);
    std::size_t at = 0;
    for (std::size_t j = 0; j < v.size(); ++j) {
      Tensor t(v[j].dtype, {static_cast<std::int64_t>(v[j].count)});
      const bool per_rank = op.reads == Ranks::kRoot;  // scatter's list: entry j is rank j's
      for (std::size_t i = 0; i < v[j].count; ++i)
        t.set(i, op.read_by(is_root) ? input_value(o, per_rank ? static_cast<int>(j) : me, per_rank ? i : at + i) : 0);
      if (v[j].bytes()) std::memcpy(v[j].data, t.data(), v[j].bytes());
      at += v[j].count;
    }
  }
  for (const P2POp& p : b.call.p2p) {
    Tensor t(p.tensor.dtype, {static_cast<std::int64_t>(p.tensor.count)});
    for (std::size_t i = 0; i < t.count(); ++i) t.set(i, p.is_send ? input_value(o, me, i) : 0);
    if (p.tensor.bytes()) std::memcpy(p.tensor.data, t.data(), p.tensor.bytes());
  }
}

// Elements of what the call wrote that differ from the result its inputs
// make: the oracle of core/op.h's collective kinds, over one period.
std::int64_t count_wrong(const Buffers& b, const BenchOptions& o, int n, int me, std::uint64_t chunk) {
  const OpSpec& spec = b.call.spec();
  const bool is_root = spec.rooted && me == o.root;
  std::int64_t bad = 0;
  for (const P2POp& p : b.call.p2p)
    if (!p.is_send) bad += count_wrong(p.tensor, expected_input(o, p.peer), 0);
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    const auto slot = static_cast<Slot>(k);
    const Operand& op = spec.operand(slot);
    if (!op.passed_by(is_root) || !op.written_by(is_root)) continue;
    // Block r of the output: what rank r contributed (or the reduction).
    const std::vector<TensorView> blocks = oracle_blocks(b.call, slot, static_cast<std::size_t>(n));
    const std::size_t mine = static_cast<std::size_t>(me) * chunk;
    for (std::size_t r = 0; r < blocks.size(); ++r) {
      const int from = static_cast<int>(r);
      switch (spec.collective) {
        case CollectiveKind::kReduce:
          if (!is_root) break;
          [[fallthrough]];
        case CollectiveKind::kAllReduce: bad += count_wrong(blocks[r], expected_reduction(o, n), 0); break;
        case CollectiveKind::kReduceScatter: bad += count_wrong(blocks[r], expected_reduction(o, n), mine); break;
        case CollectiveKind::kBroadcast: bad += count_wrong(blocks[r], expected_input(o, o.root), 0); break;
        case CollectiveKind::kScatter: bad += count_wrong(blocks[r], expected_input(o, me), 0); break;
        case CollectiveKind::kGather:
        case CollectiveKind::kAllGather: bad += count_wrong(blocks[r], expected_input(o, from), 0); break;
        case CollectiveKind::kAllToAll: bad += count_wrong(blocks[r], expected_input(o, from), mine); break;
        case CollectiveKind::kNone:
        case CollectiveKind::kBarrier:
        case CollectiveKind::kMonitoredBarrier: break;
      }
    }
  }
  return bad;
}

int auto_iters(std::uint64_t bytes) {
  const std::uint64_t budget = 1ull << 30;  // about 1 GiB moved per size
  return static_cast<int>(std::clamp<std::uint64_t>(budget / std::max<std::uint64_t>(bytes, 1), 5, 1000));
}

}  // namespace

double bus_factor(std::string_view op, int n) {
  const double dn = n;
  const std::optional<OpKind> k = bench_op(op);
  if (!k) return 1;
  const CollectiveKind c = op_spec(*k).collective;
  if (c == CollectiveKind::kAllReduce) return 2.0 * (dn - 1) / dn;
  if (c == CollectiveKind::kBarrier || c == CollectiveKind::kMonitoredBarrier) return 0;
  if (is_chunked(*k)) return (dn - 1) / dn;
  return 1;
}

void validate(const BenchOptions& o, int n) {
  const std::optional<OpKind> k = bench_op(o.op);
  if (!k) usage("unknown op '" + o.op + "' (" + bench_op_list() + ")");
  if (op_spec(*k).reduce_op)
    if (auto why = reduce_op_unsupported(o.reduce_op, o.dtype)) usage(*why);
  if (o.root < 0 || o.root >= n) usage("root " + std::to_string(o.root) + " is not a rank of " + std::to_string(n));
  if (o.min_bytes > o.max_bytes) usage("--min-bytes is above --max-bytes");
  if (!(o.step_factor > 1)) usage("--step-factor must be above 1");
  if (o.op == "sendrecv" && n < 2) usage("sendrecv needs at least 2 ranks");
  if (o.iters < 0) usage("--iters must be at least 1");
  if (o.warmup_iters < 0) usage("--warmup must be at least 0");
  // A table with no row (-b 3 -e 3 of float32) measured nothing: refused.
  bool any = moves_no_data(*k);
  for (std::uint64_t bytes : bench_sizes(o)) any = any || elements_of(*k, o, n, bytes) > 0;
  if (!any) {
    const std::uint64_t es = dtype_size(o.dtype), unit = is_chunked(*k) ? static_cast<std::uint64_t>(n) : 1;
    usage("no size asked for holds one " + std::string(is_chunked(*k) ? "chunk" : "element") + " of " + o.op + " (" +
          std::to_string(unit) + " x " + std::string(dtype_name(o.dtype)) + " = " + std::to_string(unit * es) +
          " bytes): the table would be empty; give a larger --max-bytes or --sizes");
  }
}

std::vector<std::uint64_t> bench_sizes(const BenchOptions& o) {
  const std::optional<OpKind> k = bench_op(o.op);
  std::vector<std::uint64_t> sizes;
  if (k && moves_no_data(*k)) {
    sizes.push_back(0);
  } else if (!o.sizes.empty()) {
    sizes = o.sizes;
  } else {
    for (double b = static_cast<double>(std::max<std::uint64_t>(o.min_bytes, 1)); b <= static_cast<double>(o.max_bytes) * 1.0000001;
         b *= o.step_factor)
      sizes.push_back(static_cast<std::uint64_t>(b));
  }
  return sizes;
}

std::uint64_t elements_of(OpKind kind, const BenchOptions& o, int n, std::uint64_t bytes) {
  // Whole elements, and for list ops whole chunks of n.
  std::uint64_t count = bytes / dtype_size(o.dtype);
  const std::uint64_t unit = is_chunked(kind) ? static_cast<std::uint64_t>(n) : 1;
  return count - count % unit;
}

double bench_memory_bytes(const BenchOptions& o, int n) {
  const std::optional<OpKind> kind = bench_op(o.op);
  if (!kind || moves_no_data(*kind)) return 0;
  const double es = static_cast<double>(dtype_size(o.dtype));
  const std::uint64_t unit = is_chunked(*kind) ? static_cast<std::uint64_t>(n) : 1;
  double most = 0;
  for (std::uint64_t bytes : bench_sizes(o)) {
    const std::uint64_t count = elements_of(*kind, o, n, bytes), chunk = count / unit;
    // Every rank's buffers (the root's may differ), and one chunk each for
    // the check's known inputs.
    auto rank_bytes = [&](int me) {
      double sum = static_cast<double>(chunk);
      for (std::uint64_t e : layout(*kind, o, n, me, count, chunk).tensors) sum += static_cast<double>(e);
      return sum * es;
    };
    const bool rooted = op_spec(*kind).rooted && n > 1;
    const double all = rooted ? rank_bytes(o.root) + (n - 1) * rank_bytes((o.root + 1) % n) : n * rank_bytes(0);
    most = std::max(most, all);
  }
  return most;
}

Task<void> bench_rank(Dist& c, const BenchOptions& o, RowSink on_row) {
  const int n = c.world_size();
  const int me = c.rank();
  const std::size_t es = dtype_size(o.dtype);
  const OpKind kind = *bench_op(o.op);
  const bool no_data = moves_no_data(kind);
  for (std::uint64_t want_bytes : bench_sizes(o)) {
    const std::uint64_t count = elements_of(kind, o, n, want_bytes);
    const std::uint64_t unit = is_chunked(kind) ? static_cast<std::uint64_t>(n) : 1;
    if (!no_data && count == 0) continue;
    const std::uint64_t chunk = count / unit;
    Buffers b = make_buffers(kind, o, n, me, count, chunk);
    const int iters = o.iters > 0 ? o.iters : auto_iters(count * es);
    // Collectives are awaited directly: no coroutine frame per timed op
    // beyond the core's own.
    for (int i = 0; i < o.warmup_iters; ++i) co_await dispatch(c, b.call);
    co_await c.barrier();
    const Nanos t0 = timestamp(c, o);
    for (int i = 0; i < iters; ++i) co_await dispatch(c, b.call);
    const Nanos t1 = timestamp(c, o);
    Tensor slowest(DType::kFloat64, {1});
    slowest.set(0, static_cast<double>(t1 - t0) / iters);
    co_await c.all_reduce(slowest, ReduceOp::kMax);

    std::int64_t wrong = -1;
    if (o.check && !no_data) {
      // Known inputs, one more iteration, every element compared.
      fill_inputs(b, o, me);
      co_await dispatch(c, b.call);
      Tensor total(DType::kInt64, {1});
      total.set_int(0, count_wrong(b, o, n, me, chunk));
      co_await c.all_reduce(total);
      wrong = total.get_int(0);
    }
    if (me == 0 && on_row) {
      BenchRow row;
      row.bytes = count * es;
      row.count = count;
      row.iters = iters;
      row.time_us = slowest.get(0) / 1e3;
      const double secs = row.time_us * 1e-6;
      row.algbw_GBps = secs > 0 ? static_cast<double>(row.bytes) / secs / 1e9 : 0;
      row.busbw_GBps = row.algbw_GBps * bus_factor(o.op, n);
      row.wrong = wrong;
      on_row(row);
    }
  }
}

BenchTable::BenchTable(std::ostream& out, const BenchOptions& o, int n, const std::string& what) : out_(out), o_(o) {
  char line[256];
  out << "# collie bench: " << o.op << ", " << n << " ranks, " << what << "\n";
  const OpSpec& spec = op_spec(bench_op(o.op).value_or(OpKind::kBarrier));
  out << "# dtype " << dtype_name(o.dtype) << (spec.reduce_op ? ", op " + std::string(reduce_op_name(o.reduce_op)) : "")
      << ", algorithm " << (o.algorithm == Algorithm::kAuto ? "auto" : std::string(algorithm_name(o.algorithm)))
      << ", warmup " << o.warmup_iters << ", busbw factor " << bus_factor(o.op, n) << "\n#\n";
  std::snprintf(line, sizeof line, "# %12s %12s %9s %7s %5s %11s %9s %9s %8s %6s\n", "size", "count", "type", "redop",
                "root", "time", "algbw", "busbw", "#wrong", "iters");
  out << line;
  std::snprintf(line, sizeof line, "# %12s %12s %9s %7s %5s %11s %9s %9s %8s %6s\n", "(B)", "(elements)", "", "", "",
                "(us)", "(GB/s)", "(GB/s)", "", "");
  out << line << std::flush;
}

void BenchTable::row(const BenchRow& r) {
  const OpSpec& spec = op_spec(bench_op(o_.op).value_or(OpKind::kBarrier));
  char line[256];
  std::snprintf(line, sizeof line, "  %12llu %12llu %9s %7s %5d %11.2f %9.3f %9.3f %8s %6d\n",
                static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.count),
                std::string(dtype_name(o_.dtype)).c_str(),
                spec.reduce_op ? std::string(reduce_op_name(o_.reduce_op)).c_str() : "none", spec.rooted ? o_.root : -1,
                r.time_us, r.algbw_GBps, r.busbw_GBps, r.wrong < 0 ? "N/A" : std::to_string(r.wrong).c_str(), r.iters);
  out_ << line << std::flush;
  rows_.push_back(r);
}

void BenchTable::finish() {
  double sum = 0;
  std::int64_t wrong = 0;
  for (const BenchRow& r : rows_) {
    sum += r.busbw_GBps;
    wrong += std::max<std::int64_t>(r.wrong, 0);
  }
  out_ << "# Out of bounds values : " << wrong << (wrong ? " FAILED" : " OK") << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "# Avg bus bandwidth    : %.3f GB/s\n",
                rows_.empty() ? 0.0 : sum / static_cast<double>(rows_.size()));
  out_ << line << "#\n" << std::flush;
}

std::string rows_to_json(const std::vector<BenchRow>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : rows)
    j.push_back({{"bytes", r.bytes}, {"count", r.count}, {"iters", r.iters}, {"time_us", r.time_us},
                 {"algbw_GBps", r.algbw_GBps}, {"busbw_GBps", r.busbw_GBps}, {"wrong", r.wrong}});
  return j.dump(1);
}

std::vector<BenchRow> rows_from_json(const std::string& text) {
  std::vector<BenchRow> rows;
  for (const auto& e : nlohmann::json::parse(text)) {
    BenchRow r;
    r.bytes = e.at("bytes").get<std::uint64_t>();
    r.count = e.at("count").get<std::uint64_t>();
    r.iters = e.at("iters").get<int>();
    r.time_us = e.at("time_us").get<double>();
    r.algbw_GBps = e.at("algbw_GBps").get<double>();
    r.busbw_GBps = e.at("busbw_GBps").get<double>();
    r.wrong = e.at("wrong").get<std::int64_t>();
    rows.push_back(r);
  }
  return rows;
}

nlohmann::json bench_options_to_json(const BenchOptions& o) {
  return nlohmann::json{{"op", o.op},
                        {"min_bytes", o.min_bytes},
                        {"max_bytes", o.max_bytes},
                        {"step_factor", o.step_factor},
                        {"sizes", o.sizes},
                        {"iters", o.iters},
                        {"warmup_iters", o.warmup_iters},
                        {"dtype", std::string(dtype_name(o.dtype))},
                        {"reduce_op", std::string(reduce_op_name(o.reduce_op))},
                        {"algorithm", o.algorithm == Algorithm::kAuto ? std::string("auto") : std::string(algorithm_name(o.algorithm))},
                        {"root", o.root},
                        {"check", o.check}};
}

BenchOptions bench_options_from_json(const nlohmann::json& j) {
  BenchOptions o;
  o.op = j.value("op", o.op);
  o.min_bytes = j.value("min_bytes", o.min_bytes);
  o.max_bytes = j.value("max_bytes", o.max_bytes);
  o.step_factor = j.value("step_factor", o.step_factor);
  o.sizes = j.value("sizes", o.sizes);
  o.iters = j.value("iters", o.iters);
  o.warmup_iters = j.value("warmup_iters", o.warmup_iters);
  if (auto d = parse_dtype(j.value("dtype", "float32"))) o.dtype = *d;
  if (auto r = parse_reduce_op(j.value("reduce_op", "SUM"))) o.reduce_op = *r;
  const std::string alg = j.value("algorithm", "auto");
  if (alg != "auto")
    if (auto a = parse_algorithm(alg)) o.algorithm = *a;
  o.root = j.value("root", 0);
  o.check = j.value("check", true);
  return o;
}

nlohmann::json bench_in_this_rank(Dist& dist, const nlohmann::json& options) {
  const BenchOptions o = bench_options_from_json(options);
  validate(o, dist.world_size());
  std::vector<BenchRow> rows;
  std::exception_ptr failed;
  bool done = false;
  SpawnRegistry spawned;
  auto body = [](Dist& d, const BenchOptions& opts, std::vector<BenchRow>& out, std::exception_ptr& err,
                 bool& finished) -> Spawned {
    try {
      co_await bench_rank(d, opts, [&out](const BenchRow& r) { out.push_back(r); });
    } catch (...) {
      err = std::current_exception();
    }
    finished = true;
  };
  spawned.spawn(body(dist, o, rows, failed, done));
  dist.executor().run_until([&] { return done; }, std::nullopt);
  if (failed) std::rethrow_exception(failed);
  return nlohmann::json::parse(rows_to_json(rows));
}

}  // namespace collie::tools
