#include "scenario/runner.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>

#include "conformance/reference.h"
#include "core/local_world.h"
#include "scenario/loader.h"
#include "scenario/rank_report.h"
#include "scenario/record.h"
#include "backends/tcp/process_group.h"

namespace collie::scenario {

std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::fabs(v) < 1e16) {
    std::ostringstream os;
    os.precision(1);
    os << std::fixed << v;
    return os.str();
  }
  char buf[64];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

namespace {

using reference::clone;

// ---- per-rank interpreter state -------------------------------------------

struct Handle {
  Work work;
  std::function<void()> on_complete;  // records outputs
  bool done = false;
  std::vector<std::string> reads, writes;  // tensors the op uses while in flight
};

struct RankState {
  int rank = 0;
  int world = 0;
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::vector<Tensor>> lists;
  std::map<std::string, Group> groups;
  std::map<std::string, std::uint64_t> coll_seq;  // by group name
  std::map<std::string, Handle> handles;
  std::uint64_t recv_order = 0;
};

struct Shared {
  const Scenario* s = nullptr;
  int world = 0;
  bool timing_only = false;  // tensors are phantoms; print/expect/update are skipped
  int skipped_steps = 0;     // such steps of rank 0's program
  Recorder rec;
  std::vector<OutputLine> output;
  std::vector<std::string> failures;
};

std::map<std::string, double> vars(const RankState& st) {
  return {{"rank", static_cast<double>(st.rank)}, {"world", static_cast<double>(st.world)}};
}

bool applies(const Step& step, const RankState& st) {
  if (step.ranks && std::find(step.ranks->begin(), step.ranks->end(), st.rank) == step.ranks->end()) return false;
  if (step.when && step.when->eval(vars(st)) == 0) return false;
  return true;
}

std::string item_text(const Tensor& t, std::size_t i) {
  if (t.dtype() == DType::kBool) return t.get(i) != 0 ? "True" : "False";
  if (is_floating(t.dtype())) return python_float(t.get(i));
  if (t.dtype() == DType::kInt64) return std::to_string(t.get_int(i));
  return std::to_string(static_cast<long long>(t.get(i)));
}

std::string list_repr(const std::vector<Tensor>& l) {
  std::string s = "[";
  for (std::size_t k = 0; k < l.size(); ++k) s += (k ? ", " : "") + format_tensor(l[k]);
  return s + "]";
}

// Formats a print step's text: {rank}, {world}, {T}, {T[k]}, {T[k]!r},
// {L} (a list), {L[k]} (an entry), {H.source}; {{ and }} are braces.
std::string format_text(const Step& step, RankState& st, std::vector<std::string>& failures) {
  const std::string& t = step.text;
  std::string out;
  for (std::size_t p = 0; p < t.size(); ++p) {
    if (t[p] == '{' && p + 1 < t.size() && t[p + 1] == '{') {
      out += '{';
      ++p;
      continue;
    }
    if (t[p] == '}' && p + 1 < t.size() && t[p + 1] == '}') {
      out += '}';
      ++p;
      continue;
    }
    if (t[p] != '{') {
      out += t[p];
      continue;
    }
    const std::size_t end = t.find('}', p);
    if (end == std::string::npos) {
      out += t.substr(p);
      break;
    }
    std::string field = t.substr(p + 1, end - p - 1);
    p = end;
    bool repr = false;
    if (field.size() > 2 && field.compare(field.size() - 2, 2, "!r") == 0) {
      repr = true;
      field.resize(field.size() - 2);
    }
    std::optional<std::size_t> index;
    std::string name = field;
    if (auto b = field.find('['); b != std::string::npos && field.back() == ']') {
      name = field.substr(0, b);
      try {
        index = static_cast<std::size_t>(std::stoul(field.substr(b + 1, field.size() - b - 2)));
      } catch (const std::exception&) {
        index.reset();
      }
    }
    if (name == "rank") {
      out += std::to_string(st.rank);
    } else if (name == "world") {
      out += std::to_string(st.world);
    } else if (auto dot = name.find(".source"); dot != std::string::npos && st.handles.count(name.substr(0, dot))) {
      out += std::to_string(st.handles[name.substr(0, dot)].work.source_rank());
    } else if (st.tensors.count(name)) {
      const Tensor& x = st.tensors[name];
      if (!index) {
        out += format_tensor(x);
      } else if (*index < x.count()) {
        out += repr ? format_element(x, *index) : item_text(x, *index);
      } else {
        failures.push_back(step.where.str() + ": rank " + std::to_string(st.rank) + ": print: index " +
                           std::to_string(*index) + " is out of range for tensor '" + name + "'");
      }
    } else if (st.lists.count(name)) {
      const auto& l = st.lists[name];
      if (!index) out += list_repr(l);
      else if (*index < l.size()) out += format_tensor(l[*index]);
      else failures.push_back(step.where.str() + ": print: index out of range for list '" + name + "'");
    } else {
      out += "{" + field + "}";
    }
  }
  return out;
}

void init_tensor(Tensor& t, const TensorSpec& spec, int rank, int world, int j) {
  if (!spec.values.empty()) {
    for (std::size_t i = 0; i < t.count(); ++i) t.set(i, spec.values[i]);
    return;
  }
  std::map<std::string, double> v = {{"rank", static_cast<double>(rank)},
                                     {"world", static_cast<double>(world)},
                                     {"j", static_cast<double>(j)},
                                     {"i", 0.0}};
  for (std::size_t i = 0; i < t.count(); ++i) {
    v["i"] = static_cast<double>(i);
    t.set(i, spec.init.eval(v));
  }
}

// ---- the interpreter ------------------------------------------------------

class Interpreter {
 public:
  Interpreter(Shared& sh, Communicator& c) : sh_(sh), c_(c) {
    st_.rank = c.rank();
    st_.world = sh.world;
  }

  Task<void> run() {
    const Scenario& s = *sh_.s;
    for (const TensorSpec& t : s.tensors) {
      if (t.list) {
        const int n = static_cast<int>(t.list->eval(vars(st_)));
        auto& l = st_.lists[t.name];
        for (int j = 0; j < n; ++j) {
          if (sh_.timing_only) {
            l.push_back(Tensor::phantom(t.dtype, t.shape));
          } else {
            l.emplace_back(t.dtype, t.shape);
            init_tensor(l.back(), t, st_.rank, st_.world, j);
          }
        }
      } else if (sh_.timing_only) {
        st_.tensors.emplace(t.name, Tensor::phantom(t.dtype, t.shape));
      } else {
        Tensor x(t.dtype, t.shape);
        init_tensor(x, t, st_.rank, st_.world, 0);
        st_.tensors.emplace(t.name, std::move(x));
      }
    }
    for (const GroupSpec& g : s.groups) st_.groups[g.name] = c_.new_group(g.ranks);
    const std::vector<Step>* prog = &s.program;
    if (!s.programs.empty()) {
      auto it = s.programs.find(st_.rank);
      static const std::vector<Step> kNone;
      prog = it == s.programs.end() ? &kNone : &it->second;
    }
    for (const Step& step : *prog) {
      if (!applies(step, st_)) continue;
      if (sh_.timing_only && (step.kind == StepKind::kPrint || step.kind == StepKind::kExpect ||
                              step.kind == StepKind::kUpdate)) {
        if (st_.rank == 0) ++sh_.skipped_steps;  // no values to show or compare
        continue;
      }
      check_conflicts(step, step.peer && static_cast<int>(step.peer->eval(vars(st_))) == st_.rank);
      co_await execute(step);
    }
    // Ops started asynchronously and never waited for finish here.
    for (auto& [name, h] : st_.handles) co_await finish(h);
  }

 private:
  Group group(const Step& step) { return step.group.empty() || step.group == "world" ? Group() : st_.groups[step.group]; }
  std::string gname(const Step& step) { return step.group.empty() ? "world" : step.group; }
  int peer(const Step& step) { return static_cast<int>(step.peer->eval(vars(st_))); }

  Task<void> finish(Handle& h) {
    if (h.done) co_return;
    h.done = true;
    co_await h.work;
    if (h.on_complete) h.on_complete();
  }

  // Which tensors a step reads and writes.
  static void uses(const Step& s, bool is_root, std::vector<std::string>& reads, std::vector<std::string>& writes) {
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
        reads.push_back(s.tensor);
        writes.push_back(s.output);
        break;
      default:
        break;
    }
  }

  // An op may not write a tensor that an unfinished async op uses, nor use
  // one that an unfinished op writes (torch leaves the result undefined).
  void check_conflicts(const Step& step, bool is_root) {
    std::vector<std::string> reads, writes;
    uses(step, is_root, reads, writes);
    for (const auto& [name, h] : st_.handles) {
      if (h.done) continue;
      auto clash = [&](const std::vector<std::string>& mine, const std::vector<std::string>& theirs, const char* how) {
        for (const auto& t : mine)
          if (std::find(theirs.begin(), theirs.end(), t) != theirs.end())
            sh_.failures.push_back(step.where.str() + ": rank " + std::to_string(st_.rank) + ": " +
                                   step_kind_name(step.kind) + " uses tensor '" + t + "' while handle '" + name +
                                   "' still " + how + " it; wait for '" + name + "' first");
      };
      clash(writes, h.writes, "writes");
      clash(writes, h.reads, "reads");
      clash(reads, h.writes, "writes");
    }
  }

  Task<void> launch(const Step& step, Work w, std::function<void()> on_complete) {
    if (!step.handle.empty()) {
      Handle h{std::move(w), std::move(on_complete), false, {}, {}};
      const bool is_root = step.peer && static_cast<int>(step.peer->eval(vars(st_))) == st_.rank;
      uses(step, is_root, h.reads, h.writes);
      st_.handles[step.handle] = std::move(h);
      co_return;
    }
    Handle h{std::move(w), std::move(on_complete), false, {}, {}};
    co_await finish(h);
  }

  // Records the inputs of a collective call and returns the callback that
  // records its outputs.
  std::function<void()> record_collective(const Step& step, int root, std::vector<Tensor*> in,
                                          std::vector<Tensor*> out) {
    const std::string g = gname(step);
    const std::uint64_t seq = ++st_.coll_seq[g];
    if (!sh_.rec.enabled) return {};
    CollRecord& r = sh_.rec.colls[{g, seq}];
    r.kind = step.kind == StepKind::kAllGatherIntoTensor ? StepKind::kAllGather : step.kind;
    r.where = step.where;
    r.root = root;
    r.op = step.op;
    if (r.members.empty()) {
      if (step.group.empty() || step.group == "world") {
        for (int i = 0; i < st_.world; ++i) r.members.push_back(i);
      } else {
        r.members = st_.groups[step.group].ranks();
      }
    }
    r.issued.insert(st_.rank);
    auto& ins = r.inputs[st_.rank];
    for (Tensor* t : in) ins.push_back(clone(*t));
    Recorder* rec = &sh_.rec;
    const int rank = st_.rank;
    return [rec, g, seq, rank, out] {
      auto& o = rec->colls[{g, seq}].outputs[rank];
      for (Tensor* t : out) o.push_back(clone(*t));
    };
  }

  std::vector<TensorView> views(std::vector<Tensor>& l) {
    std::vector<TensorView> v;
    for (Tensor& t : l) v.push_back(t.view());
    return v;
  }
  std::vector<Tensor*> ptrs(std::vector<Tensor>& l) {
    std::vector<Tensor*> v;
    for (Tensor& t : l) v.push_back(&t);
    return v;
  }

  Task<void> execute(const Step& step) {
    CollectiveOptions o{step.algorithm, step.timeout_ns};
    const Group g = group(step);
    const bool member = step.group.empty() || step.group == "world" || st_.groups[step.group].is_member();
    switch (step.kind) {
      case StepKind::kSend:
      case StepKind::kIsend: {
        Tensor& t = st_.tensors[step.tensor];
        const int dst = peer(step);
        const int tag = static_cast<int>(step.tag.eval(vars(st_)));
        if (sh_.rec.enabled && member) sh_.rec.sends[{st_.rank, dst, gname(step), tag}].push_back(clone(t));
        Work w = step.kind == StepKind::kSend ? c_.send(t, dst, tag, g) : c_.isend(t, dst, tag, g);
        co_await launch(step, std::move(w), {});
        co_return;
      }
      case StepKind::kRecv:
      case StepKind::kIrecv: {
        Tensor& t = st_.tensors[step.tensor];
        const int src = step.any_source ? kAnySource : peer(step);
        const int tag = static_cast<int>(step.tag.eval(vars(st_)));
        Work w = step.kind == StepKind::kRecv ? c_.recv(t, src, tag, g) : c_.irecv(t, src, tag, g);
        std::function<void()> done;
        if (sh_.rec.enabled && member) {
          const std::uint64_t order = ++st_.recv_order;
          Recorder* rec = &sh_.rec;
          const int rank = st_.rank;
          const std::string gn = gname(step);
          Tensor* tp = &t;
          Work wc = w;
          const Location where = step.where;
          done = [rec, rank, gn, tag, order, tp, wc, where] {
            rec->recvs.push_back(RecvRecord{rank, gn, tag, wc.source_rank(), order, clone(*tp), where});
          };
        }
        co_await launch(step, std::move(w), std::move(done));
        co_return;
      }
      case StepKind::kWait:
        for (const auto& h : step.handles) co_await finish(st_.handles[h]);
        co_return;
      case StepKind::kBroadcast: {
        Tensor& t = st_.tensors[step.tensor];
        const int root = peer(step);
        std::function<void()> done;
        if (member) done = record_collective(step, root, root == st_.rank ? std::vector<Tensor*>{&t} : std::vector<Tensor*>{}, {&t});
        co_await launch(step, c_.broadcast(t, root, g, o), std::move(done));
        co_return;
      }
      case StepKind::kReduce: {
        Tensor& t = st_.tensors[step.tensor];
        const int root = peer(step);
        std::function<void()> done;
        if (member) done = record_collective(step, root, {&t}, {&t});
        co_await launch(step, c_.reduce(t, root, step.op, g, o), std::move(done));
        co_return;
      }
      case StepKind::kAllReduce: {
        Tensor& t = st_.tensors[step.tensor];
        std::function<void()> done;
        if (member) done = record_collective(step, -1, {&t}, {&t});
        co_await launch(step, c_.all_reduce(t, step.op, g, o), std::move(done));
        co_return;
      }
      case StepKind::kScatter: {
        Tensor& t = st_.tensors[step.tensor];
        const int root = peer(step);
        auto& l = st_.lists[step.list];
        const bool is_root = root == st_.rank;
        std::vector<TensorView> v = is_root ? views(l) : std::vector<TensorView>{};
        std::function<void()> done;
        if (member) done = record_collective(step, root, is_root ? ptrs(l) : std::vector<Tensor*>{}, {&t});
        co_await launch(step, c_.scatter(t, root, v, g, o), std::move(done));
        co_return;
      }
      case StepKind::kGather: {
        Tensor& t = st_.tensors[step.tensor];
        const int root = peer(step);
        auto& l = st_.lists[step.list];
        const bool is_root = root == st_.rank;
        std::vector<TensorView> v = is_root ? views(l) : std::vector<TensorView>{};
        std::function<void()> done;
        if (member) done = record_collective(step, root, {&t}, is_root ? ptrs(l) : std::vector<Tensor*>{});
        co_await launch(step, c_.gather(t, root, v, g, o), std::move(done));
        co_return;
      }
      case StepKind::kAllGather: {
        Tensor& t = st_.tensors[step.tensor];
        auto& l = st_.lists[step.list];
        std::vector<TensorView> v = views(l);
        std::function<void()> done;
        if (member) done = record_collective(step, -1, {&t}, ptrs(l));
        co_await launch(step, c_.all_gather(v, t, g, o), std::move(done));
        co_return;
      }
      case StepKind::kAllGatherIntoTensor: {
        Tensor& t = st_.tensors[step.tensor];
        Tensor& out = st_.tensors[step.output];
        std::function<void()> done;
        if (member) {
          // The oracle sees the output as the list of blocks all_gather fills.
          auto record_list = record_collective(step, -1, {&t}, {});
          if (record_list) {
            Recorder* rec = &sh_.rec;
            const std::string gn = gname(step);
            const std::uint64_t seq = st_.coll_seq[gn];
            const int rank = st_.rank;
            const Tensor* in = &t;
            const Tensor* whole = &out;
            done = [rec, gn, seq, rank, in, whole] {
              auto& outs = rec->colls[{gn, seq}].outputs[rank];
              const std::size_t block = in->bytes();
              for (std::size_t b = 0; block && b < whole->bytes() / block; ++b) {
                Tensor x(in->dtype(), in->shape());
                std::memcpy(x.data(), static_cast<const std::byte*>(whole->data()) + b * block, block);
                outs.push_back(std::move(x));
              }
            };
          }
        }
        co_await launch(step, c_.all_gather_into_tensor(out, t, g, o), std::move(done));
        co_return;
      }
      case StepKind::kBarrier: {
        std::function<void()> done;
        if (member) done = record_collective(step, -1, {}, {});
        co_await launch(step, c_.barrier(g, o), std::move(done));
        co_return;
      }
      case StepKind::kNewGroup:
        st_.groups[step.name] = c_.new_group(step.members);
        co_return;
      case StepKind::kPrint:
        sh_.output.push_back(OutputLine{st_.rank, c_.transport().now(), format_text(step, st_, sh_.failures)});
        co_return;
      case StepKind::kUpdate:
        for_each_tensor(step.tensor, [&](Tensor& t, int j) {
          auto v = vars(st_);
          v["j"] = j;
          for (std::size_t i = 0; i < t.count(); ++i) {
            v["i"] = static_cast<double>(i);
            v["x"] = t.get(i);
            t.set(i, step.value.eval(v));
          }
        });
        co_return;
      case StepKind::kExpect:
        expect(step);
        co_return;
    }
  }

  template <typename F>
  void for_each_tensor(const std::string& name, F f) {
    if (st_.tensors.count(name)) {
      f(st_.tensors[name], 0);
      return;
    }
    auto& l = st_.lists[name];
    for (std::size_t j = 0; j < l.size(); ++j) f(l[j], static_cast<int>(j));
  }

  void expect(const Step& step) {
    const std::string who = step.where.str() + ": rank " + std::to_string(st_.rank) + ": expect ";
    if (step.source) {
      Handle& h = st_.handles[step.handle];
      const int want = static_cast<int>(step.source->eval(vars(st_)));
      if (!h.work.is_completed())
        sh_.failures.push_back(who + "handle '" + step.handle + "' has not completed (wait for it first)");
      else if (h.work.source_rank() != want)
        sh_.failures.push_back(who + "handle '" + step.handle + "' received from rank " +
                               std::to_string(h.work.source_rank()) + ", expected " + std::to_string(want));
    }
    if (step.tensor.empty()) return;
    for_each_tensor(step.tensor, [&](Tensor& t, int j) {
      Tensor want(t.dtype(), t.shape());
      auto v = vars(st_);
      v["j"] = j;
      for (std::size_t i = 0; i < t.count(); ++i) {
        v["i"] = static_cast<double>(i);
        want.set(i, step.equals.empty() ? step.value.eval(v) : step.equals[i]);
      }
      for (std::size_t i = 0; i < t.count(); ++i) {
        const double a = t.get(i), b = want.get(i);
        const bool same = step.tolerance > 0 ? std::fabs(a - b) <= step.tolerance
                                              : (a == b || (std::isnan(a) && std::isnan(b)));
        if (!same) {
          sh_.failures.push_back(who + step.tensor + (st_.lists.count(step.tensor) ? "[" + std::to_string(j) + "]" : "") +
                                 ": element " + std::to_string(i) + " is " + item_text(t, i) + ", expected " +
                                 item_text(want, i));
          return;
        }
      }
    });
  }

  Shared& sh_;
  Communicator& c_;
  RankState st_;
};

// ---- checking against the oracle ------------------------------------------

double epsilon(DType t) {
  switch (t) {
    case DType::kFloat16: return 1.0 / 1024;
    case DType::kBFloat16: return 1.0 / 128;
    case DType::kFloat32: return 1.2e-7;
    case DType::kFloat64: return 2.3e-16;
    default: return 0;
  }
}

// Equal bit for bit, or -- for floating sums, products and averages, where a
// different combination order rounds differently -- within n ulps of the
// magnitude involved.
std::string compare(const Tensor& got, const Tensor& want, int n, ReduceOp op, bool reduced) {
  if (got.count() != want.count()) return "has " + std::to_string(got.count()) + " elements, expected " + std::to_string(want.count());
  if (reference::bitwise_equal(got, want)) return {};
  const bool loose = reduced && is_floating(got.dtype()) &&
                     (op == ReduceOp::kSum || op == ReduceOp::kAvg || op == ReduceOp::kProduct);
  for (std::size_t i = 0; i < got.count(); ++i) {
    const double a = got.get(i), b = want.get(i);
    if (a == b || (std::isnan(a) && std::isnan(b))) continue;
    if (loose && std::fabs(a - b) <= 2.0 * n * epsilon(got.dtype()) * std::max(std::fabs(a), std::fabs(b)) + 1e-300) continue;
    return "element " + std::to_string(i) + " is " + item_text(got, i) + ", the oracle says " + item_text(want, i);
  }
  return {};
}

int check_collectives(const Recorder& rec, std::vector<std::string>& failures) {
  int checks = 0;
  for (const auto& [key, r] : rec.colls) {
    const auto& [gname, seq] = key;
    // Only calls that every member issued and completed are judged here;
    // anything else is already visible as an error or a deadlock.
    bool complete = r.issued.size() == r.members.size();
    for (int m : r.members) complete = complete && r.outputs.count(m);
    if (!complete || r.kind == StepKind::kBarrier) continue;
    ++checks;
    const int n = static_cast<int>(r.members.size());
    auto gr = [&](int global) {
      return static_cast<int>(std::lower_bound(r.members.begin(), r.members.end(), global) - r.members.begin());
    };
    std::vector<Tensor> in;
    if (r.kind != StepKind::kScatter && r.kind != StepKind::kBroadcast)
      for (int m : r.members) in.push_back(clone(r.inputs.at(m).at(0)));
    std::map<int, std::vector<Tensor>> want;  // by global rank
    bool reduced = false;
    switch (r.kind) {
      case StepKind::kBroadcast: {
        for (int m : r.members) want[m].push_back(clone(r.inputs.at(r.root).at(0)));
        break;
      }
      case StepKind::kReduce: {
        auto out = reference::reduce(in, gr(r.root), r.op);
        for (int m : r.members) want[m].push_back(std::move(out[static_cast<std::size_t>(gr(m))]));
        reduced = true;
        break;
      }
      case StepKind::kAllReduce: {
        auto out = reference::all_reduce(in, r.op);
        for (int m : r.members) want[m].push_back(std::move(out[static_cast<std::size_t>(gr(m))]));
        reduced = true;
        break;
      }
      case StepKind::kScatter: {
        std::vector<Tensor> l;
        for (const Tensor& t : r.inputs.at(r.root)) l.push_back(clone(t));
        auto out = reference::scatter(l);
        for (int m : r.members) want[m].push_back(std::move(out[static_cast<std::size_t>(gr(m))]));
        break;
      }
      case StepKind::kGather: {
        auto out = reference::gather(in, gr(r.root));
        want[r.root] = std::move(out[static_cast<std::size_t>(gr(r.root))]);
        break;
      }
      case StepKind::kAllGather: {
        auto out = reference::all_gather(in);
        for (int m : r.members) want[m] = std::move(out[static_cast<std::size_t>(gr(m))]);
        break;
      }
      default:
        break;
    }
    const std::string call = r.where.str() + ": " + step_kind_name(r.kind) + " #" + std::to_string(seq) + " on " + gname;
    for (int m : r.members) {
      const auto& got = r.outputs.at(m);
      const auto& exp = want[m];
      if (got.size() != exp.size()) {
        failures.push_back(call + ": rank " + std::to_string(m) + " has " + std::to_string(got.size()) +
                           " output tensors, the oracle " + std::to_string(exp.size()));
        continue;
      }
      for (std::size_t k = 0; k < got.size(); ++k) {
        const std::string d = compare(got[k], exp[k], n, r.op, reduced);
        if (!d.empty()) {
          failures.push_back(call + ": rank " + std::to_string(m) + (got.size() > 1 ? " entry " + std::to_string(k) : "") +
                             " " + d);
          break;
        }
      }
    }
    if (r.kind == StepKind::kAllReduce) {
      const Tensor& first = r.outputs.at(r.members[0]).at(0);
      for (int m : r.members)
        if (!reference::bitwise_equal(first, r.outputs.at(m).at(0))) {
          failures.push_back(call + ": results differ between rank " + std::to_string(r.members[0]) + " and rank " +
                             std::to_string(m) + " (all_reduce must give identical bits everywhere)");
          break;
        }
    }
  }
  return checks;
}

int check_p2p(const Recorder& rec, std::vector<std::string>& failures) {
  // The k-th receive (in posting order) that matched a message from src on
  // (group, tag) got the k-th such message src sent (non-overtaking).
  std::map<std::tuple<int, int, std::string, int>, std::vector<const RecvRecord*>> by_channel;
  for (const RecvRecord& r : rec.recvs) by_channel[{r.source, r.rank, r.group, r.tag}].push_back(&r);
  int checks = 0;
  for (auto& [key, rs] : by_channel) {
    std::sort(rs.begin(), rs.end(), [](auto* a, auto* b) { return a->order < b->order; });
    auto it = rec.sends.find(key);
    for (std::size_t k = 0; k < rs.size(); ++k) {
      ++checks;
      const RecvRecord& r = *rs[k];
      const std::string who = r.where.str() + ": rank " + std::to_string(r.rank) + ": receive from rank " +
                              std::to_string(r.source) + " (tag " + std::to_string(r.tag) + " on " + r.group + ")";
      if (it == rec.sends.end() || k >= it->second.size()) {
        failures.push_back(who + " has no matching send");
        continue;
      }
      if (!reference::bitwise_equal(r.data, it->second[k]))
        failures.push_back(who + " holds data that differs from what was sent: " +
                           compare(r.data, it->second[k], 1, ReduceOp::kMin, false));
    }
  }
  return checks;
}

// A rank process's error, as its report gave it.
struct ReportedError : std::exception {
  std::string text;
  ErrorKind kind;
  bool is_collie;
  ReportedError(std::string t, ErrorKind k, bool c) : text(std::move(t)), kind(k), is_collie(c) {}
  const char* what() const noexcept override { return text.c_str(); }
};

std::string error_text(const std::exception_ptr& e, ErrorKind* kind, bool* is_collie) {
  *is_collie = false;
  try {
    std::rethrow_exception(e);
  } catch (const ReportedError& x) {
    *kind = x.kind;
    *is_collie = x.is_collie;
    return x.text;
  } catch (const Error& x) {
    *kind = x.kind();
    *is_collie = true;
    return x.what();
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "non-standard exception";
  }
}

// Bytes of tensor memory every rank of `s` allocates (lists counted per rank).
double tensor_bytes(const Scenario& s) {
  double total = 0;
  for (const TensorSpec& t : s.tensors) {
    const double one = static_cast<double>(t.count() * dtype_size(t.dtype));
    if (!t.list) {
      total += one * s.world;
      continue;
    }
    if (t.list->is_constant()) {
      total += one * t.list->eval({}) * s.world;
      continue;
    }
    for (int r = 0; r < s.world; ++r)
      total += one * t.list->eval({{"rank", static_cast<double>(r)}, {"world", static_cast<double>(s.world)}});
  }
  return total;
}

std::string gib(double bytes) {
  std::ostringstream os;
  os.precision(bytes < 10.0 * (1 << 30) ? 2 : 0);
  os << std::fixed << bytes / (1 << 30);
  return os.str();
}

std::string report_path(const std::string& dir, int rank) { return dir + "/rank-" + std::to_string(rank) + ".cbor"; }

// Runs `s` as one process per rank and folds their reports into `sh` and
// `rr`, as an in-process run would have left them.
void run_as_processes(const Scenario& s, const RunOptions& options, Shared& sh, RunResult& rr) {
  char tmpl[] = "/tmp/collie-run-XXXXXX";
  if (!::mkdtemp(tmpl)) throw Error(ErrorKind::kUsage, OpContext{}, "cannot create a temporary folder for rank reports");
  const std::string dir = tmpl;
  std::vector<std::string> args = {"run", s.file, "--backend", "tcp", "--seed", std::to_string(s.seed)};
  if (options.world) args.insert(args.end(), {"--world", std::to_string(*options.world)});
  if (options.timeout_ns) args.insert(args.end(), {"--timeout-us", std::to_string(*options.timeout_ns / 1000)});
  args.insert(args.end(), {"--rank-report", dir});
  options.launch_ranks(args, s.world);
  rr.ranks.resize(static_cast<std::size_t>(s.world));
  for (int r = 0; r < s.world; ++r) {
    RankOutcome& out = rr.ranks[static_cast<std::size_t>(r)];
    std::ifstream f(report_path(dir, r), std::ios::binary);
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::remove(report_path(dir, r).c_str());
    if (!f || bytes.empty()) {
      out.finished = true;
      out.error = std::make_exception_ptr(ReportedError(
          "rank " + std::to_string(r) + "'s process ended without a report (it crashed or was killed; see its output)",
          ErrorKind::kTransport, true));
      continue;
    }
    try {
      RankReport rep = decode_report(bytes);
      out.finished = rep.finished;
      out.end_time = rep.end_time;
      if (rep.failed) out.error = std::make_exception_ptr(ReportedError(rep.error_text, rep.error_kind, rep.error_is_collie));
      for (auto& o : rep.output) sh.output.push_back(std::move(o));
      for (auto& x : rep.failures) sh.failures.push_back(std::move(x));
      merge_records(sh.rec, rep.rec);
      rr.end_time = std::max(rr.end_time, rep.end_time);
    } catch (const std::exception& e) {
      out.finished = true;
      out.error = std::make_exception_ptr(
          ReportedError("rank " + std::to_string(r) + "'s report is unreadable: " + e.what(), ErrorKind::kUsage, false));
    }
  }
  ::rmdir(dir.c_str());
  // Each process's clock starts at its own start: order lines by time, then rank.
  std::stable_sort(sh.output.begin(), sh.output.end(),
                   [](const OutputLine& a, const OutputLine& b) { return std::tie(a.time, a.rank) < std::tie(b.time, b.rank); });
}

}  // namespace

int run_scenario_rank(const Scenario& scenario, const RunOptions& options, const std::string& report_dir) {
  Scenario s = scenario;
  if (options.world) set_world(s, *options.world);
  if (options.seed) s.seed = *options.seed;
  Shared sh;
  sh.s = &s;
  sh.world = s.world;
  sh.rec.enabled = s.check;
  RankReport rep;
  try {
    CommunicatorOptions co;
    co.eager_threshold_bytes = s.network.eager_threshold_bytes;
    co.default_timeout_ns = options.timeout_ns ? *options.timeout_ns : s.timeout_ns;
    if (co.default_timeout_ns == 0) co.default_timeout_ns = 60'000'000'000;  // real hangs must end
    auto pg = tcp::ProcessGroup::init({}, &co);
    rep.rank = pg->rank();
    Interpreter interp(sh, pg->comm());
    try {
      pg->run([&](Communicator&) -> Task<void> { co_await interp.run(); });
    } catch (const std::exception&) {
      rep.failed = true;
      rep.error_text = error_text(std::current_exception(), &rep.error_kind, &rep.error_is_collie);
    }
    rep.finished = true;
    rep.end_time = pg->comm().transport().now();
  } catch (const std::exception&) {  // joining the job failed
    rep.failed = true;
    rep.finished = true;
    rep.error_text = error_text(std::current_exception(), &rep.error_kind, &rep.error_is_collie);
  }
  if (rep.rank < 0) {
    const char* r = std::getenv("RANK");
    rep.rank = r ? std::atoi(r) : 0;
  }
  rep.output = std::move(sh.output);
  rep.failures = std::move(sh.failures);
  rep.rec = std::move(sh.rec);
  const auto bytes = encode_report(rep);
  std::ofstream f(report_path(report_dir, rep.rank), std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return f ? 0 : 1;
}

ScenarioResult run_scenario(const Scenario& scenario, const RunOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  Scenario s = scenario;
  if (options.world) set_world(s, *options.world);
  if (options.seed) s.seed = *options.seed;
  if (options.network) s.network = *options.network;
  const BackendRegistry& reg = options.registry ? *options.registry : BackendRegistry::builtin();
  const std::string backend_name = options.backend.empty() ? s.backend : options.backend;
  const BackendInfo* backend = reg.find(backend_name);
  if (!backend) {
    std::string known;
    for (const auto& n : reg.names()) known += (known.empty() ? "" : ", ") + n;
    throw Error(ErrorKind::kUsage, OpContext{}, "unknown backend '" + backend_name + "' (available: " + known + ")");
  }

  ScenarioResult res;
  res.file = s.file;
  res.name = s.name;
  res.feature = s.feature;
  res.backend = backend_name;
  res.seed = s.seed;
  res.world = s.world;
  res.simulated = backend->simulated;
  {
    std::ostringstream cmd;
    cmd << "collie run " << s.file << " --backend " << backend_name << " --seed " << s.seed;
    if (options.world) cmd << " --world " << *options.world;
    for (const auto& f : options.fault_args) cmd << " --fault " << f;
    if (options.random_faults_seed)
      cmd << " --random-faults " << *options.random_faults_seed << (options.destructive_faults ? " --destructive" : "");
    if (options.timeout_ns) cmd << " --timeout-us " << *options.timeout_ns / 1000;
    if (!options.profile_path.empty()) cmd << " --profile " << options.profile_path;
    if (options.timing_only && !s.timing_only) cmd << " --timing-only";
    res.replay = cmd.str();
  }

  res.timing_only = s.timing_only || options.timing_only;
  if (res.timing_only && !backend->timing_only)
    throw Error(ErrorKind::kUsage, OpContext{},
                "timing-only runs need the simulator (payloads are not materialised); backend '" + backend_name +
                    "' moves real bytes");
  if (!res.timing_only) {
    // A run that would need more tensor memory than this guard is refused
    // with the way out, rather than exhausting the machine.
    const double bytes = tensor_bytes(s);
    if (bytes > options.max_tensor_bytes)
      throw Error(ErrorKind::kUsage, OpContext{},
                  s.file + ": the tensors of " + std::to_string(s.world) + " ranks need " + gib(bytes) +
                      " GiB of memory (limit " + gib(options.max_tensor_bytes) +
                      " GiB); run with --timing-only to simulate costs without payloads");
  }

  Shared sh;
  sh.s = &s;
  sh.world = s.world;
  sh.timing_only = res.timing_only;
  sh.rec.enabled = s.check && !res.timing_only;

  RunResult rr;
  std::unique_ptr<InProcessBackend> world_backend;
  if (options.launch_ranks) {
    if (backend_name != "tcp")
      throw Error(ErrorKind::kUsage, OpContext{}, "only the tcp backend runs scenarios as processes");
    run_as_processes(s, options, sh, rr);
  } else {
  BackendOptions bo;
  bo.world_size = s.world;
  bo.seed = s.seed;
  bo.network = s.network;
  bo.faults = s.faults;
  auto append = [](sim::FaultPlan& to, const sim::FaultPlan& from) {
    to.messages.insert(to.messages.end(), from.messages.begin(), from.messages.end());
    to.partitions.insert(to.partitions.end(), from.partitions.begin(), from.partitions.end());
    to.degradations.insert(to.degradations.end(), from.degradations.begin(), from.degradations.end());
    to.crashes.insert(to.crashes.end(), from.crashes.begin(), from.crashes.end());
    to.slow.insert(to.slow.end(), from.slow.begin(), from.slow.end());
    to.skews.insert(to.skews.end(), from.skews.begin(), from.skews.end());
  };
  append(bo.faults, options.extra_faults);
  if (options.random_faults_seed)
    append(bo.faults, sim::random_fault_plan(*options.random_faults_seed, s.world, options.destructive_faults));
  bo.trace = !options.trace_path.empty();
  bo.explorer = options.explorer;
  bo.timing_only = res.timing_only;
  if (options.eager_threshold_bytes) {
    s.network.eager_threshold_bytes = *options.eager_threshold_bytes;
    bo.network.eager_threshold_bytes = *options.eager_threshold_bytes;
  }
  try {
    world_backend = backend->create(bo);
  } catch (const std::exception& e) {
    res.outcome = "error";
    res.detail = e.what();
    res.failures.push_back("backend '" + backend_name + "' could not start a world of " + std::to_string(s.world) +
                           ": " + e.what());
    return res;
  }
  std::vector<Transport*> ts;
  for (int r = 0; r < s.world; ++r) ts.push_back(&world_backend->transport(r));
  CommunicatorOptions co;
  co.eager_threshold_bytes = s.network.eager_threshold_bytes;
  co.observer = world_backend->observer();
  co.default_timeout_ns = options.timeout_ns ? *options.timeout_ns : s.timeout_ns;
  {
    LocalWorld world(ts, co);
    std::vector<std::unique_ptr<Interpreter>> interp;
    for (int r = 0; r < s.world; ++r) interp.push_back(std::make_unique<Interpreter>(sh, world.comm(r)));
    auto program = [&](Communicator& c) -> Task<void> { co_await interp[static_cast<std::size_t>(c.rank())]->run(); };
    RunContext ctx;
    ctx.label = "seed " + std::to_string(s.seed);
    ctx.replay = res.replay;
    InProcessBackend* wb = world_backend.get();
    ctx.faults = [wb] { return wb->injected_faults(); };
    ctx.crashed = [wb](int r) { return wb->crashed(r); };
    try {
      rr = world.run(program, ctx);
    } catch (const std::exception& e) {
      rr.deadlocked = false;
      res.outcome = "error";
      res.detail = std::string("the backend failed: ") + e.what();
      res.failures.push_back(res.detail);
      return res;
    }
  }
  }  // in-process
  const std::vector<InjectedFault> injected = world_backend ? world_backend->injected_faults() : std::vector<InjectedFault>{};
  res.virtual_time = std::max(rr.end_time, rr.stopped_at);
  res.deadlock_dot = rr.deadlock_dot;
  res.causes = rr.causes;
  res.faults_injected = injected.size();
  if (!options.trace_path.empty()) {
    std::ofstream f(options.trace_path, std::ios::binary);
    if (!world_backend || !world_backend->write_trace(f, std::max(rr.end_time, rr.stopped_at)))
      res.failures.push_back("backend '" + backend_name + "' records no trace; --trace needs the simulator");
  }
  if (!options.dot_path.empty() && !rr.deadlock_dot.empty()) {
    std::ofstream f(options.dot_path, std::ios::binary);
    f << rr.deadlock_dot;
  }
  res.trace_hash = world_backend ? world_backend->trace_hash() : 0;
  res.events = world_backend ? world_backend->events() : 0;
  res.output = std::move(sh.output);

  // What happened.
  struct RankError {
    int rank;
    ErrorKind kind;
    bool is_collie;
    std::string text;
  };
  std::vector<RankError> errors;
  for (std::size_t r = 0; r < rr.ranks.size(); ++r) {
    if (!rr.ranks[r].error) continue;
    RankError e{static_cast<int>(r), ErrorKind::kUsage, false, ""};
    e.text = error_text(rr.ranks[r].error, &e.kind, &e.is_collie);
    errors.push_back(e);
  }
  if (!rr.deadlocked) {
    for (const auto& f : injected) {
      if (f.kind != InjectedFault::Kind::kCrash) continue;
      // The survivors finished; the job still lost a rank.
      errors.push_back(RankError{f.src, ErrorKind::kTransport, true,
                                 "transport: rank " + std::to_string(f.src) + " crashed (" + f.text + ")"});
    }
  }
  if (!errors.empty()) {
    res.outcome = "error";
    res.detail = errors.front().text;
  } else if (rr.deadlocked) {
    res.outcome = "deadlock";
    res.detail = rr.deadlock_report;
  } else {
    res.outcome = "ok";
  }
  if (rr.deadlocked && !errors.empty()) res.detail += "\n" + rr.deadlock_report;

  // Against what was expected.
  const Outcome& want = s.outcome;
  switch (want.kind) {
    case Outcome::kOk:
      if (res.outcome != "ok") res.failures.push_back("expected the run to end ok, but: " + res.detail);
      break;
    case Outcome::kError: {
      bool matched = false;
      for (const RankError& e : errors) {
        if (want.error_kind && (!e.is_collie || e.kind != *want.error_kind)) continue;
        if (want.rank && e.rank != *want.rank) continue;
        if (!want.contains.empty() && e.text.find(want.contains) == std::string::npos) continue;
        matched = true;
      }
      if (!matched) {
        std::string w = want.error_kind ? std::string(error_kind_name(*want.error_kind)) : "any";
        res.failures.push_back(want.where.str() + ": expected an error '" + w + "'" +
                               (want.rank ? " on rank " + std::to_string(*want.rank) : "") +
                               (want.contains.empty() ? "" : " containing \"" + want.contains + "\"") + ", but " +
                               (res.outcome == "ok" ? std::string("the run ended ok") : "got: " + res.detail));
      }
      break;
    }
    case Outcome::kDeadlock: {
      std::vector<int> want_ranks = want.deadlocked_ranks;
      std::sort(want_ranks.begin(), want_ranks.end());
      if (!rr.deadlocked) {
        res.failures.push_back(want.where.str() + ": expected a deadlock, but the run ended " + res.outcome +
                               (res.detail.empty() ? "" : ": " + res.detail));
      } else if (rr.blocked_ranks != want_ranks) {
        std::string got;
        for (int r : rr.blocked_ranks) got += (got.empty() ? "" : ",") + std::to_string(r);
        res.failures.push_back(want.where.str() + ": expected ranks blocked in the deadlock to be exactly those listed, but they are " + got);
      } else if (!want.contains.empty() && rr.deadlock_report.find(want.contains) == std::string::npos) {
        res.failures.push_back(want.where.str() + ": the deadlock report does not contain \"" + want.contains + "\"");
      }
      break;
    }
  }
  for (auto& f : sh.failures) res.failures.push_back(std::move(f));
  res.skipped_steps = sh.skipped_steps;
  if (sh.rec.enabled) {
    res.checks += check_collectives(sh.rec, res.failures);
    res.checks += check_p2p(sh.rec, res.failures);
  }
  res.passed = res.failures.empty();
  res.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace collie::scenario
