#include "scenario/interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "check/reference.h"
#include "scenario/print_text.h"

namespace collie::scenario {

namespace {

using reference::clone;

struct Handle {
  Work work;
  std::function<void()> on_complete;  // records outputs
  bool done = false;
  std::vector<std::string> reads, writes;  // tensors the op uses while in flight
};

CollectiveKind collective_kind(StepKind k) {
  switch (k) {
    case StepKind::kBroadcast: return CollectiveKind::kBroadcast;
    case StepKind::kReduce: return CollectiveKind::kReduce;
    case StepKind::kAllReduce: return CollectiveKind::kAllReduce;
    case StepKind::kScatter: return CollectiveKind::kScatter;
    case StepKind::kGather: return CollectiveKind::kGather;
    case StepKind::kAllGather:
    case StepKind::kAllGatherIntoTensor: return CollectiveKind::kAllGather;
    case StepKind::kReduceScatter:
    case StepKind::kReduceScatterTensor: return CollectiveKind::kReduceScatter;
    case StepKind::kAllToAll:
    case StepKind::kAllToAllSingle: return CollectiveKind::kAllToAll;
    default: return CollectiveKind::kBarrier;
  }
}

std::string list_repr(const std::vector<Tensor>& l) {
  std::string s = "[";
  for (std::size_t k = 0; k < l.size(); ++k) s += (k ? ", " : "") + format_tensor(l[k]);
  return s + "]";
}

// Stores `x`, computed by `e` with `vars`, as element i of `t`: a value the
// dtype cannot hold (2 ** 100 into int64, -1 into uint8) is refused at the
// expression, as torch refuses it, instead of wrapping silently.
void store(Tensor& t, std::size_t i, double x, const Expr& e, const std::map<std::string, double>& vars) {
  if (auto why = value_unfit(t.dtype(), x))
    throw ScenarioError(e.where(), "in expression " + Expr::quoted(e.text()) + ": " + *why + " with " +
                                       Expr::describe_vars(vars));
  t.set(i, x);
}

void init_tensor(Tensor& t, const TensorSpec& spec, int rank, int world, int j) {
  if (!spec.values.empty()) {
    for (std::size_t i = 0; i < t.count(); ++i) t.set(i, spec.values[i]);  // checked when loaded
    return;
  }
  std::map<std::string, double> v = {{"rank", static_cast<double>(rank)},
                                     {"world", static_cast<double>(world)},
                                     {"j", static_cast<double>(j)},
                                     {"i", 0.0}};
  for (std::size_t i = 0; i < t.count(); ++i) {
    v["i"] = static_cast<double>(i);
    store(t, i, spec.init.eval(v), spec.init, v);
  }
}

// `whole` cut into consecutive blocks of `counts` elements (1-D copies):
// how the records show an op that takes one tensor where torch's list form
// takes a list (all_to_all_single, reduce_scatter_tensor).
std::vector<Tensor> cut(const Tensor& whole, const std::vector<std::size_t>& counts) {
  std::vector<Tensor> out;
  std::size_t at = 0;
  for (std::size_t c : counts) {
    Tensor x(whole.dtype(), {static_cast<std::int64_t>(c)});
    if (c) std::memcpy(x.data(), static_cast<const std::byte*>(whole.data()) + at * dtype_size(whole.dtype()),
                       c * dtype_size(whole.dtype()));
    at += c;
    out.push_back(std::move(x));
  }
  return out;
}

// Which tensors a step reads and writes.
void uses(const Step& s, bool is_root, std::vector<std::string>& reads, std::vector<std::string>& writes) {
  switch (s.kind) {
    case StepKind::kSend:
    case StepKind::kIsend:
    case StepKind::kPrint:
    case StepKind::kExpect:
      if (!s.tensor.empty()) reads.push_back(s.tensor);
      break;
    case StepKind::kRecv:
    case StepKind::kIrecv:
    case StepKind::kBroadcast:
    case StepKind::kReduce:
    case StepKind::kAllReduce:
    case StepKind::kUpdate:
      writes.push_back(s.tensor);
      break;
    case StepKind::kScatter:
      writes.push_back(s.tensor);
      if (is_root) reads.push_back(s.list);
      break;
    case StepKind::kGather:
      reads.push_back(s.tensor);
      if (is_root) writes.push_back(s.list);
      break;
    case StepKind::kAllGather:
      reads.push_back(s.tensor);
      writes.push_back(s.list);
      break;
    case StepKind::kAllGatherIntoTensor:
    case StepKind::kReduceScatterTensor:
    case StepKind::kAllToAllSingle:
      reads.push_back(s.tensor);
      writes.push_back(s.output);
      break;
    case StepKind::kReduceScatter:
    case StepKind::kAllToAll:
      reads.push_back(s.list);
      writes.push_back(s.output);
      break;
    default:
      break;
  }
}

}  // namespace

struct Interpreter::State {
  const Scenario& s;
  Dist& d;
  RunLog& log;
  bool timing_only;
  int rank = 0;
  int world = 0;
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::vector<Tensor>> lists;
  std::map<std::string, Group> groups;
  std::map<std::string, std::uint64_t> coll_seq;  // by group name
  std::map<std::string, Handle> handles;
  std::uint64_t recv_order = 0;

  State(const Scenario& sc, Dist& dist, RunLog& l, bool t)
      : s(sc), d(dist), log(l), timing_only(t), rank(dist.rank()), world(sc.world) {}

  bool recording() const { return log.records.enabled && !timing_only; }

  std::map<std::string, double> vars() const {
    return {{"rank", static_cast<double>(rank)}, {"world", static_cast<double>(world)}};
  }

  bool applies(const Step& step) const {
    if (step.ranks && std::find(step.ranks->begin(), step.ranks->end(), rank) == step.ranks->end()) return false;
    if (step.when && step.when->eval(vars()) == 0) return false;
    return true;
  }

  Group group(const Step& step) {
    return step.group.empty() || step.group == "world" ? Group() : groups[step.group];
  }
  static std::string gname(const Step& step) { return step.group.empty() ? "world" : step.group; }
  std::size_t group_size(const Step& step) {
    return step.group.empty() || step.group == "world" ? static_cast<std::size_t>(world)
                                                       : groups[step.group].ranks().size();
  }
  int peer(const Step& step) const { return static_cast<int>(step.peer->eval(vars())); }
  bool is_member(const Step& step) {
    return step.group.empty() || step.group == "world" || groups[step.group].is_member();
  }

  void fail(const Step& step, const std::string& what) {
    log.failures.push_back(step.where.str() + ": rank " + std::to_string(rank) + ": " + what);
  }

  // What execute() started: the op's Work (none for a step that is done
  // when execute() returns) and what records its outputs once it completes.
  struct Started {
    Work work;
    std::function<void()> done;
  };

  // Makes this rank's tensors and groups and returns its program. Not part
  // of run(): a coroutine's frame keeps every local for its whole life.
  const std::vector<Step>& prepare() {
    for (const TensorSpec& t : s.tensors) {
      if (t.list) {
        const int n = static_cast<int>(t.list->eval(vars()));
        auto& l = lists[t.name];
        for (int j = 0; j < n; ++j) {
          if (timing_only) {
            l.push_back(Tensor::phantom(t.dtype, t.shape));
          } else {
            l.emplace_back(t.dtype, t.shape);
            init_tensor(l.back(), t, rank, world, j);
          }
        }
      } else if (timing_only) {
        tensors.emplace(t.name, Tensor::phantom(t.dtype, t.shape));
      } else {
        Tensor x(t.dtype, t.shape);
        init_tensor(x, t, rank, world, 0);
        tensors.emplace(t.name, std::move(x));
      }
    }
    for (const GroupSpec& g : s.groups) groups[g.name] = d.new_group(g.ranks, 0, "group '" + g.name + "'");
    const std::vector<Step>* prog = &s.program;
    if (!s.programs.empty()) {
      auto it = s.programs.find(rank);
      static const std::vector<Step> kNone;
      prog = it == s.programs.end() ? &kNone : &it->second;
    }
    return *prog;
  }

  Task<void> run() {
    for (const Step& step : prepare()) {
      if (!applies(step)) continue;
      if (timing_only && (step.kind == StepKind::kPrint || step.kind == StepKind::kExpect ||
                          step.kind == StepKind::kUpdate)) {
        if (rank == 0) ++log.skipped_steps;  // no values to show or compare
        continue;
      }
      check_conflicts(step, step.peer && peer(step) == rank);
      if (step.kind == StepKind::kWait) {
        for (const auto& h : step.handles) co_await finish(handles[h]);
        continue;
      }
      Started op = execute(step);
      if (!op.work.state()) continue;
      if (!step.handle.empty()) {
        keep(step, std::move(op));
        continue;
      }
      co_await op.work;
      if (op.done) op.done();
    }
    // Ops started asynchronously and never waited for finish here.
    for (auto& [name, h] : handles) co_await finish(h);
  }

  Task<void> finish(Handle& h) {
    if (h.done) co_return;
    h.done = true;
    co_await h.work;
    if (h.on_complete) h.on_complete();
  }

  // An op may not write a tensor that an unfinished async op uses, nor use
  // one that an unfinished op writes (torch leaves the result undefined).
  void check_conflicts(const Step& step, bool is_root) {
    std::vector<std::string> reads, writes;
    uses(step, is_root, reads, writes);
    for (const auto& [name, h] : handles) {
      if (h.done) continue;
      auto clash = [&](const std::vector<std::string>& mine, const std::vector<std::string>& theirs, const char* how) {
        for (const auto& t : mine)
          if (std::find(theirs.begin(), theirs.end(), t) != theirs.end())
            fail(step, step_kind_name(step.kind) + " uses tensor '" + t + "' while handle '" + name + "' still " + how +
                           " it; wait for '" + name + "' first");
      };
      clash(writes, h.writes, "writes");
      clash(writes, h.reads, "reads");
      clash(reads, h.writes, "writes");
    }
  }

  // Keeps a started op under its step's handle, for a later wait.
  void keep(const Step& step, Started op) {
    Handle h{std::move(op.work), std::move(op.done), false, {}, {}};
    uses(step, step.peer && peer(step) == rank, h.reads, h.writes);
    handles[step.handle] = std::move(h);
  }

  // Records the inputs of a collective call and returns the callback that
  // records its outputs (into `out`'s copies, or through `record_out`).
  std::function<void()> record_collective(const Step& step, int root, std::vector<const Tensor*> in,
                                          std::vector<const Tensor*> out) {
    auto copies = [](const std::vector<const Tensor*>& ts) {
      std::vector<Tensor> c;
      for (const Tensor* t : ts) c.push_back(clone(*t));
      return c;
    };
    return record_collective_as(step, root, [&] { return copies(in); }, [out, copies] { return copies(out); });
  }
  // The same with functions that make the inputs' records (now) and the
  // outputs' (once the call completes); neither is called without
  // recording (timing-only tensors have no memory).
  std::function<void()> record_collective_as(const Step& step, int root,
                                             const std::function<std::vector<Tensor>()>& inputs,
                                             std::function<std::vector<Tensor>()> outputs) {
    const std::string g = gname(step);
    const std::uint64_t seq = ++coll_seq[g];
    if (!recording()) return {};
    check::CollectiveRecord& r = log.records.collectives[{g, seq}];
    r.kind = collective_kind(step.kind);
    r.where = step.where.str();
    r.root = root;
    r.op = step.op;
    if (r.members.empty()) {
      if (step.group.empty() || step.group == "world") {
        for (int i = 0; i < world; ++i) r.members.push_back(i);
      } else {
        r.members = groups[step.group].ranks();
      }
    }
    r.issued.insert(rank);
    r.inputs[rank] = inputs();
    check::OpRecords* rec = &log.records;
    const int me = rank;
    return [rec, g, seq, me, outputs = std::move(outputs)] { rec->collectives[{g, seq}].outputs[me] = outputs(); };
  }

  static std::vector<TensorView> views(std::vector<Tensor>& l) {
    std::vector<TensorView> v;
    for (Tensor& t : l) v.push_back(t.view());
    return v;
  }
  static std::vector<const Tensor*> ptrs(const std::vector<Tensor>& l) {
    std::vector<const Tensor*> v;
    for (const Tensor& t : l) v.push_back(&t);
    return v;
  }

  // Starts `step` (anything but a wait). Not a coroutine: its locals, those
  // of every kind of step, are gone while the op runs -- a coroutine frame
  // holding them all was ~3 KB per rank for the whole run.
  Started execute(const Step& step) {
    CollectiveOptions o{step.algorithm, step.timeout_ns, !step.handle.empty()};
    const Group g = group(step);
    const bool member = is_member(step);
    switch (step.kind) {
      case StepKind::kSend:
      case StepKind::kIsend: {
        Tensor& t = tensors[step.tensor];
        const int dst = peer(step);
        const int tag = static_cast<int>(step.tag.eval(vars()));
        if (recording() && member) log.records.sends[{rank, dst, gname(step), tag}].push_back(clone(t));
        Work w = step.kind == StepKind::kSend ? d.send(t, dst, tag, g) : d.isend(t, dst, tag, g);
        return {std::move(w), {}};
      }
      case StepKind::kRecv:
      case StepKind::kIrecv: {
        Tensor& t = tensors[step.tensor];
        const int src = step.any_source ? kAnySource : peer(step);
        const int tag = static_cast<int>(step.tag.eval(vars()));
        Work w = step.kind == StepKind::kRecv ? d.recv(t, src, tag, g) : d.irecv(t, src, tag, g);
        std::function<void()> done;
        if (recording() && member) {
          const std::uint64_t order = ++recv_order;
          check::OpRecords* rec = &log.records;
          const int me = rank;
          const std::string gn = gname(step);
          const Tensor* tp = &t;
          Work wc = w;
          const std::string where = step.where.str();
          done = [rec, me, gn, tag, order, tp, wc, where] {
            rec->recvs.push_back(check::RecvRecord{me, gn, tag, wc.source_rank(), order, clone(*tp), where});
          };
        }
        return {std::move(w), std::move(done)};
      }
      case StepKind::kWait:
        break;  // run() waits
      case StepKind::kBroadcast: {
        Tensor& t = tensors[step.tensor];
        const int root = peer(step);
        std::function<void()> done;
        if (member)
          done = record_collective(step, root, root == rank ? std::vector<const Tensor*>{&t} : std::vector<const Tensor*>{},
                                   {&t});
        return {d.broadcast(t, root, g, o), std::move(done)};
      }
      case StepKind::kReduce: {
        Tensor& t = tensors[step.tensor];
        const int root = peer(step);
        std::function<void()> done;
        if (member) done = record_collective(step, root, {&t}, {&t});
        return {d.reduce(t, root, step.op, g, o), std::move(done)};
      }
      case StepKind::kAllReduce: {
        Tensor& t = tensors[step.tensor];
        std::function<void()> done;
        if (member) done = record_collective(step, -1, {&t}, {&t});
        return {d.all_reduce(t, step.op, g, o), std::move(done)};
      }
      case StepKind::kScatter: {
        Tensor& t = tensors[step.tensor];
        const int root = peer(step);
        auto& l = lists[step.list];
        const bool is_root = root == rank;
        std::vector<TensorView> v = is_root ? views(l) : std::vector<TensorView>{};
        std::function<void()> done;
        if (member) done = record_collective(step, root, is_root ? ptrs(l) : std::vector<const Tensor*>{}, {&t});
        return {d.scatter(t, root, v, g, o), std::move(done)};
      }
      case StepKind::kGather: {
        Tensor& t = tensors[step.tensor];
        const int root = peer(step);
        auto& l = lists[step.list];
        const bool is_root = root == rank;
        std::vector<TensorView> v = is_root ? views(l) : std::vector<TensorView>{};
        std::function<void()> done;
        if (member) done = record_collective(step, root, {&t}, is_root ? ptrs(l) : std::vector<const Tensor*>{});
        return {d.gather(t, root, v, g, o), std::move(done)};
      }
      case StepKind::kAllGather: {
        Tensor& t = tensors[step.tensor];
        auto& l = lists[step.list];
        std::vector<TensorView> v = views(l);
        std::function<void()> done;
        if (member) done = record_collective(step, -1, {&t}, ptrs(l));
        return {d.all_gather(v, t, g, o), std::move(done)};
      }
      case StepKind::kAllGatherIntoTensor: {
        Tensor& t = tensors[step.tensor];
        Tensor& out = tensors[step.output];
        std::function<void()> done;
        if (member) {
          // The oracle sees the output as the list of blocks all_gather fills.
          done = record_collective_as(
              step, -1, [&] { return std::vector<Tensor>{clone(t)}; },
              [&t, &out] { return cut(out, std::vector<std::size_t>(t.count() ? out.count() / t.count() : 0, t.count())); });
        }
        return {d.all_gather_into_tensor(out, t, g, o), std::move(done)};
      }
      case StepKind::kReduceScatter: {
        Tensor& out = tensors[step.output];
        auto& l = lists[step.list];
        std::vector<TensorView> v = views(l);
        std::function<void()> done;
        if (member) done = record_collective(step, -1, ptrs(l), {&out});
        return {d.reduce_scatter(out, v, step.op, g, o), std::move(done)};
      }
      case StepKind::kReduceScatterTensor: {
        Tensor& t = tensors[step.tensor];
        Tensor& out = tensors[step.output];
        std::function<void()> done;
        if (member) {
          // The oracle sees the input as the list reduce_scatter takes.
          const std::size_t n = group_size(step);
          const std::vector<std::size_t> blocks(n, n ? t.count() / n : 0);
          done = record_collective_as(
              step, -1, [&] { return cut(t, blocks); }, [&out] { return std::vector<Tensor>{clone(out)}; });
        }
        return {d.reduce_scatter_tensor(out, t, step.op, g, o), std::move(done)};
      }
      case StepKind::kAllToAll: {
        auto& outs = lists[step.output];
        auto& ins = lists[step.list];
        std::vector<TensorView> ov = views(outs), iv = views(ins);
        std::function<void()> done;
        if (member) done = record_collective(step, -1, ptrs(ins), ptrs(outs));
        return {d.all_to_all(ov, iv, g, o), std::move(done)};
      }
      case StepKind::kAllToAllSingle: {
        Tensor& t = tensors[step.tensor];
        Tensor& out = tensors[step.output];
        const std::size_t n = group_size(step);
        // Sizes in rows of dim 0 in the file; in elements at the seam.
        auto elements = [&](const SplitSizes& sp, const Tensor& x) {
          std::vector<std::size_t> e;
          const std::size_t rows = x.shape().empty() ? 1 : static_cast<std::size_t>(x.shape()[0]);
          const std::size_t row = rows ? x.count() / rows : 0;
          if (!sp.given()) return std::vector<std::size_t>(n, n ? x.count() / n : 0);
          for (double r : sp.eval(rank, world, n)) e.push_back(static_cast<std::size_t>(r) * row);
          return e;
        };
        const std::vector<std::size_t> out_e = elements(step.output_splits, out), in_e = elements(step.input_splits, t);
        std::function<void()> done;
        if (member)
          done = record_collective_as(step, -1, [&] { return cut(t, in_e); }, [&out, out_e] { return cut(out, out_e); });
        // Without sizes torch cuts evenly; the seam is given none either.
        const std::vector<std::size_t> none;
        return {d.all_to_all_single(out, t, step.output_splits.given() ? out_e : none,
                                    step.input_splits.given() ? in_e : none, g, o),
                std::move(done)};
      }
      case StepKind::kBarrier: {
        std::function<void()> done;
        if (member) done = record_collective(step, -1, {}, {});
        return {d.barrier(g, o), std::move(done)};
      }
      case StepKind::kNewGroup:
        groups[step.name] = d.new_group(step.members, 0, "group '" + step.name + "'");
        return {};
      case StepKind::kPrint:
        log.output.push_back(OutputLine{rank, d.executor().now(), format_text(step)});
        return {};
      case StepKind::kUpdate:
        for_each_tensor(step.tensor, [&](Tensor& t, int j) {
          auto v = vars();
          v["j"] = j;
          for (std::size_t i = 0; i < t.count(); ++i) {
            v["i"] = static_cast<double>(i);
            v["x"] = t.get(i);
            store(t, i, step.value.eval(v), step.value, v);
          }
        });
        return {};
      case StepKind::kExpect:
        expect(step);
        return {};
    }
    return {};
  }

  template <typename F>
  void for_each_tensor(const std::string& name, F f) {
    if (tensors.count(name)) {
      f(tensors[name], 0);
      return;
    }
    auto& l = lists[name];
    for (std::size_t j = 0; j < l.size(); ++j) f(l[j], static_cast<int>(j));
  }

  // A print step's text (scenario/print_text.h); the loader checked it.
  std::string format_text(const Step& step) {
    std::optional<PrintTextError> error;
    std::string out;
    for (const PrintPart& p : parse_print_text(step.text, &error)) {
      if (!p.is_field) {
        out += p.text;
      } else if (p.source) {
        out += std::to_string(handles[p.text].work.source_rank());
      } else if (p.text == "rank") {
        out += std::to_string(rank);
      } else if (p.text == "world") {
        out += std::to_string(world);
      } else if (tensors.count(p.text)) {
        const Tensor& x = tensors[p.text];
        if (!p.index) out += format_tensor(x);
        else if (*p.index < x.count()) out += p.repr ? format_element(x, *p.index) : format_item(x, *p.index);
      } else if (lists.count(p.text)) {
        const auto& l = lists[p.text];
        if (!p.index) out += list_repr(l);
        else if (*p.index < l.size()) out += format_tensor(l[*p.index]);
      }
    }
    return out;
  }

  void expect(const Step& step) {
    const std::string what = "expect ";
    auto fail = [&](const Step& st, const std::string& text) {
      if (st.unspecified.empty()) return this->fail(st, text);
      log.unspecified_failures.push_back(st.where.str() + ": rank " + std::to_string(rank) + ": " + text +
                                         " (torch leaves this unspecified: " + st.unspecified + ")");
    };
    if (step.source) {
      Handle& h = handles[step.handle];
      const int want = static_cast<int>(step.source->eval(vars()));
      if (!h.work.is_completed())
        fail(step, what + "handle '" + step.handle + "' has not completed (wait for it first)");
      else if (h.work.source_rank() != want)
        fail(step, what + "handle '" + step.handle + "' received from rank " + std::to_string(h.work.source_rank()) +
                       ", expected " + std::to_string(want));
    }
    if (step.tensor.empty()) return;
    for_each_tensor(step.tensor, [&](Tensor& t, int j) {
      Tensor want(t.dtype(), t.shape());
      auto v = vars();
      v["j"] = j;
      for (std::size_t i = 0; i < t.count(); ++i) {
        v["i"] = static_cast<double>(i);
        if (step.equals.empty()) store(want, i, step.value.eval(v), step.value, v);
        else want.set(i, step.equals[i]);  // checked when loaded
      }
      for (std::size_t i = 0; i < t.count(); ++i) {
        const double a = t.get(i), b = want.get(i);
        const bool same = step.tolerance > 0 ? std::fabs(a - b) <= step.tolerance
                                              : (a == b || (std::isnan(a) && std::isnan(b)));
        if (!same) {
          fail(step, what + step.tensor + (lists.count(step.tensor) ? "[" + std::to_string(j) + "]" : "") +
                         ": element " + std::to_string(i) + " is " + format_item(t, i) + ", expected " +
                         format_item(want, i));
          return;
        }
      }
    });
  }
};

Interpreter::Interpreter(const Scenario& s, Dist& dist, RunLog& log, bool timing_only)
    : st_(std::make_unique<State>(s, dist, log, timing_only)) {}

Interpreter::~Interpreter() = default;

Task<void> Interpreter::run() { return st_->run(); }

}  // namespace collie::scenario
