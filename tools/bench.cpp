#include "tools/bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "core/task.h"

namespace collie::tools {

namespace {

constexpr std::string_view kOps[] = {"all_reduce", "broadcast",      "reduce",     "all_gather", "scatter",
                                     "gather",     "reduce_scatter", "all_to_all", "barrier",    "sendrecv"};
constexpr const char* kOpList =
    "all_reduce, broadcast, reduce, all_gather, scatter, gather, reduce_scatter, all_to_all, barrier, sendrecv";

bool is_list_op(std::string_view op) { return op == "all_gather" || op == "scatter" || op == "gather"; }
// The buffer is cut into one chunk per rank: nccl-tests' size is the whole buffer.
bool is_chunked(std::string_view op) { return is_list_op(op) || op == "reduce_scatter" || op == "all_to_all"; }
bool is_reduction(std::string_view op) { return op == "all_reduce" || op == "reduce" || op == "reduce_scatter"; }

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

void fill(Tensor& t, const BenchOptions& o, int r) {
  for (std::size_t i = 0; i < t.count(); ++i) t.set(i, input_value(o, r, i));
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
std::int64_t count_wrong(const Tensor& got, const Tensor& want, std::size_t begin, std::size_t len,
                         std::size_t phase) {
  const std::size_t es = dtype_size(got.dtype());
  const auto* g = static_cast<const std::byte*>(got.data()) + begin * es;
  const auto* w = static_cast<const std::byte*>(want.data());
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < len; ++i)
    if (std::memcmp(g + i * es, w + ((phase + i) % kPeriod) * es, es) != 0) ++wrong;
  return wrong;
}
std::int64_t count_wrong(const Tensor& got, const Tensor& want) { return count_wrong(got, want, 0, got.count(), 0); }

// The buffers of one size and the op over them.
struct Buffers {
  Tensor main;                     // all_reduce/broadcast/reduce: the tensor; list ops: this rank's chunk;
                                   // reduce_scatter, all_to_all: the whole input
  Tensor recv;                     // sendrecv's receive buffer; reduce_scatter's chunk; all_to_all's output
  std::vector<Tensor> list;        // all_gather's output, scatter's/gather's list (root only)
  std::vector<TensorView> views;
};

Work collective(Dist& c, const BenchOptions& o, Buffers& b);

// sendrecv: a ring shift. The receive is posted first so neither side waits on the other.
Task<void> sendrecv(Dist& c, Buffers& b) {
  const int n = c.world_size();
  std::vector<Work> w;
  w.push_back(c.irecv(b.recv, (c.rank() + n - 1) % n, 7));
  w.push_back(c.isend(b.main, (c.rank() + 1) % n, 7));
  co_await wait_all(w);
}

// One iteration. Collectives are awaited directly: no coroutine frame per
// timed op beyond the core's own.
Task<void> issue(Dist& c, const BenchOptions& o, Buffers& b) {
  if (o.op == "sendrecv") co_await sendrecv(c, b);
  else co_await collective(c, o, b);
}

Work collective(Dist& c, const BenchOptions& o, Buffers& b) {
  CollectiveOptions co;
  co.algorithm = o.algorithm;
  const std::string& op = o.op;
  if (op == "all_reduce") return c.all_reduce(b.main, o.reduce_op, {}, co);
  if (op == "broadcast") return c.broadcast(b.main, o.root, {}, co);
  if (op == "reduce") return c.reduce(b.main, o.root, o.reduce_op, {}, co);
  if (op == "all_gather") return c.all_gather(b.views, b.main, {}, co);
  if (op == "scatter") return c.scatter(b.main, o.root, b.views, {}, co);
  if (op == "gather") return c.gather(b.main, o.root, b.views, {}, co);
  if (op == "reduce_scatter") return c.reduce_scatter_tensor(b.recv, b.main, o.reduce_op, {}, co);
  if (op == "all_to_all") return c.all_to_all_single(b.recv, b.main, {}, {}, {}, co);
  return c.barrier({}, co);
}

int auto_iters(std::uint64_t bytes) {
  const std::uint64_t budget = 1ull << 30;  // about 1 GiB moved per size
  return static_cast<int>(std::clamp<std::uint64_t>(budget / std::max<std::uint64_t>(bytes, 1), 5, 1000));
}

}  // namespace

double bus_factor(std::string_view op, int n) {
  const double dn = n;
  if (op == "all_reduce") return 2.0 * (dn - 1) / dn;
  if (is_chunked(op)) return (dn - 1) / dn;
  if (op == "barrier") return 0;
  return 1;
}

void validate(const BenchOptions& o, int n) {
  if (std::find(std::begin(kOps), std::end(kOps), o.op) == std::end(kOps))
    usage("unknown op '" + o.op + "' (" + kOpList + ")");
  if (is_reduction(o.op))
    if (auto why = reduce_op_unsupported(o.reduce_op, o.dtype)) usage(*why);
  if (o.root < 0 || o.root >= n) usage("root " + std::to_string(o.root) + " is not a rank of " + std::to_string(n));
  if (o.min_bytes > o.max_bytes) usage("--min-bytes is above --max-bytes");
  if (!(o.step_factor > 1)) usage("--step-factor must be above 1");
  if (o.op == "sendrecv" && n < 2) usage("sendrecv needs at least 2 ranks");
}

Task<void> bench_rank(Dist& c, const BenchOptions& o, std::vector<BenchRow>* rows) {
  const int n = c.world_size();
  const int me = c.rank();
  const std::size_t es = dtype_size(o.dtype);
  std::vector<std::uint64_t> sizes;
  if (o.op == "barrier") {
    sizes.push_back(0);
  } else if (!o.sizes.empty()) {
    sizes = o.sizes;
  } else {
    for (double b = static_cast<double>(std::max<std::uint64_t>(o.min_bytes, 1)); b <= static_cast<double>(o.max_bytes) * 1.0000001;
         b *= o.step_factor)
      sizes.push_back(static_cast<std::uint64_t>(b));
  }
  const bool root_only_list = o.op == "scatter" || o.op == "gather";
  for (std::uint64_t want_bytes : sizes) {
    // Whole elements, and for list ops whole chunks of n.
    std::uint64_t count = want_bytes / es;
    const std::uint64_t unit = is_chunked(o.op) ? static_cast<std::uint64_t>(n) : 1;
    count -= count % unit;
    if (o.op != "barrier" && count == 0) continue;
    const std::uint64_t chunk = is_chunked(o.op) ? count / unit : count;
    const bool whole_input = o.op == "reduce_scatter" || o.op == "all_to_all";
    Buffers b;
    b.main = Tensor(o.dtype, {static_cast<std::int64_t>(whole_input ? count : chunk)});
    if (o.op == "sendrecv" || o.op == "reduce_scatter") b.recv = Tensor(o.dtype, {static_cast<std::int64_t>(chunk)});
    if (o.op == "all_to_all") b.recv = Tensor(o.dtype, {static_cast<std::int64_t>(count)});
    if (is_list_op(o.op) && (!root_only_list || me == o.root)) {
      for (int r = 0; r < n; ++r) b.list.emplace_back(o.dtype, std::vector<std::int64_t>{static_cast<std::int64_t>(chunk)});
      for (auto& t : b.list) b.views.push_back(t);
    }
    const int iters = o.iters > 0 ? o.iters : auto_iters(count * es);
    for (int i = 0; i < o.warmup_iters; ++i) co_await issue(c, o, b);
    co_await c.barrier();
    const Nanos t0 = c.executor().now();
    if (o.op == "sendrecv") {
      for (int i = 0; i < iters; ++i) co_await sendrecv(c, b);
    } else {
      for (int i = 0; i < iters; ++i) co_await collective(c, o, b);
    }
    const Nanos t1 = c.executor().now();
    Tensor slowest(DType::kFloat64, {1});
    slowest.set(0, static_cast<double>(t1 - t0) / iters);
    co_await c.all_reduce(slowest, ReduceOp::kMax);

    std::int64_t wrong = -1;
    if (o.check && o.op != "barrier") {
      // Known inputs, one more iteration, every element compared.
      if (o.op == "broadcast") {
        if (me == o.root) fill(b.main, o, me);
        else std::memset(b.main.data(), 0, b.main.bytes());
      } else if (o.op == "scatter") {
        for (std::size_t r = 0; r < b.list.size(); ++r) fill(b.list[r], o, static_cast<int>(r));
      } else {
        fill(b.main, o, me);
      }
      co_await issue(c, o, b);
      std::int64_t bad = 0;
      if (o.op == "all_reduce" || (o.op == "reduce" && me == o.root)) bad = count_wrong(b.main, expected_reduction(o, n));
      else if (o.op == "broadcast") bad = count_wrong(b.main, expected_input(o, o.root));
      else if (o.op == "scatter") bad = count_wrong(b.main, expected_input(o, me));
      else if (o.op == "sendrecv") bad = count_wrong(b.recv, expected_input(o, (me + n - 1) % n));
      else if (o.op == "reduce_scatter")  // this rank's chunk of the reduced whole
        bad = count_wrong(b.recv, expected_reduction(o, n), 0, chunk, static_cast<std::size_t>(me) * chunk);
      else if (o.op == "all_to_all")  // block r: rank r's chunk `me`
        for (int r = 0; r < n; ++r)
          bad += count_wrong(b.recv, expected_input(o, r), static_cast<std::size_t>(r) * chunk, chunk,
                             static_cast<std::size_t>(me) * chunk);
      else if (o.op == "all_gather" || (o.op == "gather" && me == o.root))
        for (int r = 0; r < n; ++r) bad += count_wrong(b.list[static_cast<std::size_t>(r)], expected_input(o, r));
      Tensor total(DType::kInt64, {1});
      total.set_int(0, bad);
      co_await c.all_reduce(total);
      wrong = total.get_int(0);
    }
    if (me == 0 && rows) {
      BenchRow row;
      row.bytes = count * es;
      row.count = count;
      row.iters = iters;
      row.time_us = slowest.get(0) / 1e3;
      const double secs = row.time_us * 1e-6;
      row.algbw_GBps = secs > 0 ? static_cast<double>(row.bytes) / secs / 1e9 : 0;
      row.busbw_GBps = row.algbw_GBps * bus_factor(o.op, n);
      row.wrong = wrong;
      rows->push_back(row);
    }
  }
}

void print_bench_table(std::ostream& out, const BenchOptions& o, int n, const std::string& what,
                       const std::vector<BenchRow>& rows) {
  char line[256];
  out << "# collie bench: " << o.op << ", " << n << " ranks, " << what << "\n";
  out << "# dtype " << dtype_name(o.dtype) << (is_reduction(o.op) ? ", op " + std::string(reduce_op_name(o.reduce_op)) : "")
      << ", algorithm " << (o.algorithm == Algorithm::kAuto ? "auto" : std::string(algorithm_name(o.algorithm)))
      << ", warmup " << o.warmup_iters << ", busbw factor " << bus_factor(o.op, n) << "\n#\n";
  std::snprintf(line, sizeof line, "# %12s %12s %9s %7s %5s %11s %9s %9s %8s %6s\n", "size", "count", "type", "redop",
                "root", "time", "algbw", "busbw", "#wrong", "iters");
  out << line;
  std::snprintf(line, sizeof line, "# %12s %12s %9s %7s %5s %11s %9s %9s %8s %6s\n", "(B)", "(elements)", "", "", "",
                "(us)", "(GB/s)", "(GB/s)", "", "");
  out << line;
  double sum = 0;
  for (const BenchRow& r : rows) {
    const bool rooted = o.op == "broadcast" || o.op == "reduce" || o.op == "scatter" || o.op == "gather";
    std::snprintf(line, sizeof line, "  %12llu %12llu %9s %7s %5d %11.2f %9.3f %9.3f %8s %6d\n",
                  static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.count),
                  std::string(dtype_name(o.dtype)).c_str(),
                  is_reduction(o.op) ? std::string(reduce_op_name(o.reduce_op)).c_str() : "none", rooted ? o.root : -1,
                  r.time_us, r.algbw_GBps, r.busbw_GBps, r.wrong < 0 ? "N/A" : std::to_string(r.wrong).c_str(),
                  r.iters);
    out << line;
    sum += r.busbw_GBps;
  }
  std::int64_t wrong = 0;
  for (const BenchRow& r : rows) wrong += std::max<std::int64_t>(r.wrong, 0);
  out << "# Out of bounds values : " << wrong << (wrong ? " FAILED" : " OK") << "\n";
  std::snprintf(line, sizeof line, "# Avg bus bandwidth    : %.3f GB/s\n", rows.empty() ? 0.0 : sum / static_cast<double>(rows.size()));
  out << line << "#\n";
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
      co_await bench_rank(d, opts, &out);
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
