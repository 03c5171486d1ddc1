#include "scenario/interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "check/call_recorder.h"
#include "check/reference.h"
#include "scenario/print_text.h"
#include "core/op.h"

namespace collie::scenario {

namespace {

using reference::clone;

struct Handle {
  Work work;
  std::function<void()> on_complete;  // records outputs
  bool done = false;
  std::vector<std::string> reads, writes;  // tensors the op uses while in flight
};

std::string list_repr(const std::vector<Tensor>& l) {
  std::string s = "[";
  for (std::size_t k = 0; k < l.size(); ++k) s += (k ? ", " : "") + format_tensor(l[k]);
  return s + "]";
}

// Stores `x`, computed by `e` with `vars`, as element i of `t`, as
// scenario/value.h converts: a value the dtype cannot hold (2 ** 63 into
// int64, -1 into uint8) is refused at the expression, as torch refuses it,
// instead of wrapping silently.
void store(Tensor& t, std::size_t i, const Value& x, const Expr& e, const Vars& vars) {
  if (auto why = value_unfit(t.dtype(), x))
    throw ScenarioError(e.where(), "in expression " + Expr::quoted(e.text()) + ": " + *why + " with " +
                                       Expr::describe_vars(vars));
  store_element(t, i, x);
}

// Element i of `t` := `e` with v's "i" = i, for every i. An expression
// that does not use i is evaluated (and checked) once, at i = 0, and its
// element copied: every element holds the same bits either way.
void store_all(Tensor& t, const Expr& e, Vars& v) {
  Value& element = v["i"];
  element = 0;
  if (t.count() == 0) return;
  if (!e.uses("i")) {
    store(t, 0, e.eval(v), e, v);
    const std::size_t size = dtype_size(t.dtype());
    auto* bytes = static_cast<std::byte*>(t.data());
    for (std::size_t i = 1; i < t.count(); ++i) std::memcpy(bytes + i * size, bytes, size);
    return;
  }
  for (std::size_t i = 0; i < t.count(); ++i) {
    element = i;
    store(t, i, e.eval(v), e, v);
  }
}

void init_tensor(Tensor& t, const TensorSpec& spec, int rank, int world, int j) {
  if (!spec.values.empty()) {
    for (std::size_t i = 0; i < t.count(); ++i) store_element(t, i, spec.values[i]);  // checked when loaded
    return;
  }
  Vars v = {{"rank", rank}, {"world", world}, {"j", j}};
  store_all(t, spec.init, v);
}

// Element i of `a` and `b` (one dtype) as an expect step compares them:
// integers exactly (int64 beyond 2^53 too), floats equal or both NaN, or
// within `tolerance` when it is > 0.
bool same_element(const Tensor& a, const Tensor& b, std::size_t i, double tolerance) {
  if (!is_floating(a.dtype())) {
    const std::int64_t x = a.get_int(i), y = b.get_int(i);
    if (tolerance > 0) {
      const Value::Int d = static_cast<Value::Int>(x) - y;
      return static_cast<double>(d < 0 ? -d : d) <= tolerance;
    }
    return x == y;
  }
  const double x = a.get(i), y = b.get(i);
  if (tolerance > 0) return std::fabs(x - y) <= tolerance;
  return x == y || (std::isnan(x) && std::isnan(y));
}

// The tensors a step reads and writes while it runs, by name: an op's
// operands as core/op.h's table says this rank uses them (`is_root`: this
// rank is the op's root); what print, expect and update touch.
void uses(const Step& s, bool is_root, std::vector<std::string>& reads, std::vector<std::string>& writes) {
  switch (s.kind) {
    case StepKind::kOp: {
      const OpSpec& spec = s.spec();
      for (std::size_t k = 0; k < kNumSlots; ++k) {
        const auto slot = static_cast<Slot>(k);
        const Operand& o = spec.operand(slot);
        if (!o.passed_by(is_root) || s.slot(slot).empty()) continue;
        if (o.read_by(is_root)) reads.push_back(s.slot(slot));
        if (o.written_by(is_root)) writes.push_back(s.slot(slot));
      }
      for (const P2PStep& p : s.p2p) (p.is_send ? reads : writes).push_back(p.tensor);
      break;
    }
    case StepKind::kExpect:
      if (!s.tensor.empty()) reads.push_back(s.tensor);
      break;
    case StepKind::kPrint: {
      // A print that says why its values are unspecified may show a
      // tensor an op in flight writes (what it holds before wait()).
      if (!s.unspecified.empty()) break;
      std::optional<PrintTextError> error;
      for (const PrintPart& p : parse_print_text(s.text, &error))
        if (p.is_field && !p.source && p.text != "rank" && p.text != "world") reads.push_back(p.text);
      break;
    }
    case StepKind::kUpdate:
      writes.push_back(s.tensor);
      break;
    case StepKind::kWait:
    case StepKind::kNewGroup:
    case StepKind::kDestroyGroup:
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
  // The scenario's single tensors, in the place of their TensorSpec in
  // s.tensors (a list's place stays empty): a vector, not a map by name --
  // a State per rank lives for the whole run, and a map node with its key
  // was 120 B of every rank's.
  std::vector<Tensor> tensors;
  // The tensor named `name` (not a list), or null.
  Tensor* find_tensor(const std::string& name) {
    for (std::size_t k = 0; k < s.tensors.size(); ++k)
      if (!s.tensors[k].list && s.tensors[k].name == name) return &tensors[k];
    return nullptr;
  }
  // The tensor named `name`; an operand the step leaves out (no name) is
  // an empty tensor, shared: it has no elements to write.
  Tensor& tensor(const std::string& name) {
    if (Tensor* t = find_tensor(name)) return *t;
    static Tensor none;
    return none;
  }
  // Tensor lists, groups and handles by name: made on first use. A large
  // timing-only world's ranks mostly have none, and a State per rank lives
  // for the whole run (three empty maps were 144 B of every rank's).
  struct Named {
    std::map<std::string, std::vector<Tensor>> lists;
    std::map<std::string, Group> groups;
    std::map<std::string, Handle> handles;
  };
  std::unique_ptr<Named> named_;
  Named& named() {
    if (!named_) named_ = std::make_unique<Named>();
    return *named_;
  }
  bool has_handles() const { return named_ && !named_->handles.empty(); }
  // Only when recording(): otherwise never used.
  std::unique_ptr<check::CallRecorder> recorder;

  State(const Scenario& sc, Dist& dist, RunLog& l, bool t)
      : s(sc), d(dist), log(l), timing_only(t), rank(dist.rank()), world(sc.world) {
    if (recording()) recorder = std::make_unique<check::CallRecorder>(l.records, dist.rank(), sc.world);
  }

  bool recording() const { return log.records.enabled && !timing_only; }

  Vars vars() const { return {{"rank", rank}, {"world", world}}; }
  // An expression the loader checked to be a whole number in range (a
  // rank, a tag, a count) on this rank.
  std::int64_t whole(const Expr& e) const { return e.eval(vars()).whole().value_or(0); }

  bool applies(const Step& step) const {
    if (step.ranks && std::find(step.ranks->begin(), step.ranks->end(), rank) == step.ranks->end()) return false;
    if (step.when && !step.when->eval(vars()).truthy()) return false;
    return true;
  }

  Group group(const Step& step) {
    return step.group.empty() || step.group == "world" ? Group() : named().groups[step.group];
  }
  static std::string gname(const Step& step) { return step.group.empty() ? "world" : step.group; }
  std::size_t group_size(const Step& step) {
    return step.group.empty() || step.group == "world" ? static_cast<std::size_t>(world)
                                                       : named().groups[step.group].ranks().size();
  }
  int peer(const Step& step) const { return static_cast<int>(whole(*step.peer)); }

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
    tensors.resize(s.tensors.size());
    for (std::size_t k = 0; k < s.tensors.size(); ++k) {
      const TensorSpec& t = s.tensors[k];
      if (t.list) {
        const int n = static_cast<int>(whole(*t.list));
        auto& l = named().lists[t.name];
        for (int j = 0; j < n; ++j) {
          if (timing_only) {
            l.push_back(Tensor::phantom(t.dtype, t.shape_on(rank)));
          } else {
            l.emplace_back(t.dtype, t.shape_on(rank));
            init_tensor(l.back(), t, rank, world, j);
          }
        }
      } else if (timing_only) {
        tensors[k] = Tensor::phantom(t.dtype, t.shape_on(rank));
      } else {
        tensors[k] = Tensor(t.dtype, t.shape_on(rank));
        init_tensor(tensors[k], t, rank, world, 0);
      }
    }
    for (const GroupSpec& g : s.groups) named().groups[g.name] = d.new_group(g.ranks, 0, "group '" + g.name + "'");
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
      if (timing_only && step.kind != StepKind::kOp && step.kind != StepKind::kWait &&
          step.kind != StepKind::kNewGroup && step.kind != StepKind::kDestroyGroup) {
        if (rank == 0) ++log.skipped_steps;  // no values to show or compare
        continue;
      }
      check_conflicts(step, rooted_here(step));
      if (step.kind == StepKind::kWait) {
        co_await wait_for(step);
        continue;
      }
      Started op = execute(step);  // a step other than an op: no Work, done
      if (!step.handle.empty()) {
        keep(step, std::move(op));
        continue;
      }
      co_await op.work;
      if (op.done) op.done();
    }
    co_await finish_all();
  }

  // Waits run in coroutines of their own, whose loops' state lives only
  // while they wait (in run()'s frame it would live per rank for the run).
  Task<void> wait_for(const Step& step) {
    for (const auto& h : step.handles) co_await finish(named().handles[h]);
  }
  // Ops started asynchronously and never waited for finish here.
  Task<void> finish_all() {
    if (!has_handles()) co_return;
    for (auto& [name, h] : named().handles) co_await finish(h);
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
    if (!has_handles()) return;
    std::vector<std::string> reads, writes;
    uses(step, is_root, reads, writes);
    for (const auto& [name, h] : named().handles) {
      if (h.done) continue;
      auto clash = [&](const std::vector<std::string>& mine, const std::vector<std::string>& theirs, const char* how) {
        for (const auto& t : mine)
          if (std::find(theirs.begin(), theirs.end(), t) != theirs.end())
            fail(step, step.kind_name() + " uses tensor '" + t + "' while handle '" + name + "' still " + how +
                           " it; wait for '" + name + "' first");
      };
      clash(writes, h.writes, "writes");
      clash(writes, h.reads, "reads");
      clash(reads, h.writes, "writes");
    }
  }

  // Whether this rank is the root of a rooted op step.
  bool rooted_here(const Step& step) const {
    return step.kind == StepKind::kOp && step.spec().rooted && step.peer && peer(step) == rank;
  }

  // Keeps a started op under its step's handle, for a later wait.
  void keep(const Step& step, Started op) {
    Handle h{std::move(op.work), std::move(op.done), false, {}, {}};
    uses(step, rooted_here(step), h.reads, h.writes);
    named().handles[step.handle] = std::move(h);
  }

  static std::vector<TensorView> views(std::vector<Tensor>& l) {
    std::vector<TensorView> v;
    for (Tensor& t : l) v.push_back(t.view());
    return v;
  }

  // The call an op step makes on this rank.
  DistCall call_of(const Step& step) {
    const OpSpec& spec = step.spec();
    DistCall c;
    c.kind = step.op;
    c.async = step.async;
    c.group = group(step);
    if (step.any_source) c.peer = kAnySource;
    else if (step.peer) c.peer = peer(step);
    if (spec.tag) c.tag = static_cast<int>(whole(step.tag));
    c.reduce_op = step.reduce_op;
    c.algorithm = step.algorithm;
    c.timeout_ns = step.timeout_ns;
    c.poll_ns = step.poll_ns;
    c.wait_all_ranks = step.wait_all_ranks;
    const bool is_root = spec.rooted && c.peer == rank;
    for (std::size_t k = 0; k < kNumSlots; ++k) {
      const auto slot = static_cast<Slot>(k);
      const Operand& o = spec.operand(slot);
      if (!o.present()) continue;
      if (!o.is_list()) c.set_views(slot, {tensor(step.slot(slot)).view()});
      else if (o.passed_by(is_root)) c.set_views(slot, views(named().lists[step.slot(slot)]));
    }
    if (spec.splits) {
      // Sizes in rows of dim 0 in the file; in elements at the seam. Without
      // sizes torch cuts evenly, and the seam is given none either.
      const std::size_t n = group_size(step);
      auto elements = [&](const SplitSizes& sp, const Tensor& x) {
        std::vector<std::size_t> e;
        const std::size_t rows = x.shape().empty() ? 1 : static_cast<std::size_t>(x.shape()[0]);
        const std::size_t row = rows ? x.count() / rows : 0;
        for (const Value& r : sp.eval(rank, world, n)) e.push_back(static_cast<std::size_t>(r.whole().value_or(0)) * row);
        return e;
      };
      if (step.input_splits.given()) c.input_splits = elements(step.input_splits, tensor(step.tensor));
      if (step.output_splits.given()) c.output_splits = elements(step.output_splits, tensor(step.output));
    }
    for (const P2PStep& p : step.p2p)
      c.p2p.push_back(P2POp{p.is_send, tensor(p.tensor).view(), static_cast<int>(whole(p.peer)),
                            static_cast<int>(whole(p.tag))});
    return c;
  }

  // Starts `step` (anything but a wait). Not a coroutine: its locals are
  // gone while the op runs -- a coroutine frame holding them (a DistCall,
  // the recorder's callbacks) would live per rank for the whole run.
  Started execute(const Step& step) {
    switch (step.kind) {
      case StepKind::kOp: {
        const DistCall c = call_of(step);
        // Inputs are recorded before the call: an implementation that can
        // only block completes it inside dispatch().
        std::function<void(const Work&)> recorded;
        if (recording()) recorded = recorder->before(c, gname(step), step.where.str());
        Work work = dispatch(d, c);
        if (recording()) recorder->issued(work);
        std::function<void()> done;
        if (recorded) done = [recorded = std::move(recorded), work] { recorded(work); };
        return {std::move(work), std::move(done)};
      }
      case StepKind::kWait:
        break;  // run() waits
      case StepKind::kNewGroup:
        named().groups[step.name] = d.new_group(step.members, 0, "group '" + step.name + "'");
        return {};
      case StepKind::kDestroyGroup:
        d.destroy_group(named().groups.at(step.group));
        return {};
      case StepKind::kPrint:
        log.output.push_back(OutputLine{rank, d.executor().now(), format_text(step)});
        return {};
      case StepKind::kUpdate:
        for_each_tensor(step.tensor, [&](Tensor& t, int j) {
          auto v = vars();
          v["j"] = j;
          Value& element = v["i"];
          Value& x = v["x"];
          for (std::size_t i = 0; i < t.count(); ++i) {
            element = i;
            x = element_value(t, i);  // exact: an int64 element is its integer
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
    if (Tensor* t = find_tensor(name)) {
      f(*t, 0);
      return;
    }
    auto& l = named().lists[name];
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
        out += std::to_string(named().handles[p.text].work.source_rank());
      } else if (p.text == "rank") {
        out += std::to_string(rank);
      } else if (p.text == "world") {
        out += std::to_string(world);
      } else if (const Tensor* t = find_tensor(p.text)) {
        const Tensor& x = *t;
        // t[k] of a tensor of two or more dimensions is a row (a tensor,
        // printed as one); of one dimension, an element.
        if (!p.index) out += format_tensor(x);
        else if (x.shape().size() >= 2) out += format_tensor(x.row(*p.index));
        else if (*p.index < x.count()) out += p.repr ? format_element(x, *p.index) : format_item(x, *p.index);
      } else if (named().lists.count(p.text)) {
        const auto& l = named().lists[p.text];
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
      Handle& h = named().handles[step.handle];
      const int want = static_cast<int>(whole(*step.source));
      if (!h.work.is_completed())
        fail(step, what + "handle '" + step.handle + "' has not completed (wait for it first)");
      else if (h.work.source_rank() != want)
        fail(step, what + "handle '" + step.handle + "' received from rank " + std::to_string(h.work.source_rank()) +
                       ", expected " + std::to_string(want));
    }
    if (step.tensor.empty()) return;
    for_each_tensor(step.tensor, [&](Tensor& t, int j) {
      // The expected values, converted to the tensor's dtype as the values
      // it holds were (an int64 exactly, a float32 rounded), then compared
      // element by element: integers exactly, floats as doubles.
      Tensor want(t.dtype(), t.shape());
      auto v = vars();
      v["j"] = j;
      if (step.equals.empty()) store_all(want, step.value, v);
      else
        for (std::size_t i = 0; i < t.count(); ++i) store_element(want, i, step.equals[i]);  // checked when loaded
      for (std::size_t i = 0; i < t.count(); ++i) {
        if (!same_element(t, want, i, step.tolerance)) {
          fail(step, what + step.tensor + (named().lists.count(step.tensor) ? "[" + std::to_string(j) + "]" : "") +
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
