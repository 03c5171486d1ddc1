#include "scenario/program_checks.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "scenario/print_text.h"
#include "scenario/yaml_reader.h"

namespace collie::scenario {

namespace {

Vars vars_for(int rank, int world) { return {{"rank", rank}, {"world", world}}; }

// v as a whole number in [lo, hi], or nullopt (2.5, -1, nan, 2**70).
std::optional<std::int64_t> whole_in(const Value& v, std::int64_t lo, std::int64_t hi) {
  const std::optional<std::int64_t> w = v.whole();
  if (!w || *w < lo || *w > hi) return std::nullopt;
  return w;
}

[[noreturn]] void fail(const Location& where, const std::string& message) { throw ScenarioError(where, message); }

std::string shape_of(const TensorSpec& t, int rank) {
  return std::string(dtype_name(t.dtype)) + " x " + std::to_string(t.count_on(rank));
}

// Whether a check of tensors a and b belongs to this pass: the pass over
// the program (no rank) takes shapes that are the same on every rank, the
// pass per rank those that depend on it.
bool this_pass(const TensorSpec& a, const TensorSpec& b, std::optional<int> rank) {
  return (a.per_rank || b.per_rank) == rank.has_value();
}

std::string group_label(const Step& st) { return st.group.empty() ? "world" : "group '" + st.group + "'"; }

class ProgramChecks {
 public:
  explicit ProgramChecks(const Scenario& s) : s_(s), world_(s.world) {}

  // Every problem is reported (errors_), step by step; a stage runs only
  // when the ones before it found nothing (per-rank checks need the names).
  void run() {
    for_each_step([&](const Step& st) { errors_.attempt([&] { equals_fit(st); }); });
    names(s_.program);
    for (const auto& [rank, prog] : s_.programs) names(prog);
    errors_.rethrow();
    world();
    errors_.rethrow();
    per_rank(s_.program, std::nullopt);
    for (const auto& [rank, prog] : s_.programs) per_rank(prog, rank);
    errors_.rethrow();
  }

 private:
  template <typename F>
  void for_each_step(F f) {
    for (const Step& st : s_.program) f(st);
    for (const auto& [rank, prog] : s_.programs)
      for (const Step& st : prog) f(st);
  }

  // The literal values an expect step compares with must fit its tensor.
  void equals_fit(const Step& st) {
    if (st.kind != StepKind::kExpect || st.tensor.empty()) return;
    const TensorSpec* t = s_.find_tensor(st.tensor);
    if (!t) return;
    for (std::size_t k = 0; k < st.equals.size(); ++k)
      if (auto why = value_unfit(t->dtype, st.equals[k]))
        fail(k < st.equals_where.size() ? st.equals_where[k] : st.where, "equals of tensor '" + t->name + "': " + *why);
  }

  const TensorSpec& any_tensor(const Step& st, const std::string& name) const {
    const TensorSpec* t = s_.find_tensor(name);
    if (!t) {
      std::vector<std::string> names;
      for (const auto& x : s_.tensors) names.push_back(x.name);
      fail(st.where, "unknown tensor '" + name + "'" +
                         (names.empty() ? std::string(" (no tensors are defined)") : did_you_mean(name, names)));
    }
    return *t;
  }
  const TensorSpec& tensor(const Step& st, const std::string& name, bool want_list, std::string_view role) const {
    const TensorSpec& t = any_tensor(st, name);
    if (want_list && !t.list)
      fail(st.where, std::string(role) + " '" + name + "' must be a list tensor (give it 'list: N')");
    if (!want_list && t.list)
      fail(st.where, std::string(role) + " '" + name + "' is a list; this step needs a single tensor");
    return t;
  }

  // Each entry of list `l` is shaped like tensor `t` (on `rank`).
  static void shapes_match(const Step& st, const TensorSpec& t, std::string_view t_role, const TensorSpec& l,
                           std::string_view l_role, std::optional<int> rank) {
    if (!this_pass(t, l, rank)) return;
    const int r = rank.value_or(0);
    if (t.dtype != l.dtype || t.count_on(r) != l.count_on(r))
      fail(st.where, "mismatched shapes: each entry of " + std::string(l_role) + " '" + l.name + "' is " +
                         shape_of(l, r) + " but " + std::string(t_role) + " '" + t.name + "' is " + shape_of(t, r) +
                         (rank ? " on rank " + std::to_string(r) : std::string()));
  }

  // An op step's operands: each named tensor exists and is a list exactly
  // where the op takes one, and the operands agree in shape as the op
  // needs (list entries like the tensor; two lists entry for entry; a
  // tensor cut into blocks of the other's dtype). Without `rank`: the
  // names, and shapes that do not depend on the rank; with it, those that do.
  void operands(const Step& st, std::optional<int> rank = std::nullopt) {
    const OpSpec& spec = st.spec();
    struct Named {
      Slot slot;
      const Operand* o;
      const TensorSpec* t;
    };
    std::vector<Named> named;
    for (std::size_t k = 0; k < kNumSlots; ++k) {
      const auto slot = static_cast<Slot>(k);
      const Operand& o = spec.operand(slot);
      if (!o.present() || st.slot(slot).empty()) continue;
      named.push_back(Named{slot, &o, &tensor(st, st.slot(slot), o.is_list(), slot_name(slot))});
    }
    for (const P2PStep& p : st.p2p) tensor(st, p.tensor, false, "tensor");
    const Named* single = nullptr;  // a whole tensor (not cut into blocks)
    const Named* blocks = nullptr;  // a tensor cut into blocks
    std::vector<const Named*> lists;
    for (const Named& n : named) {
      if (n.o->is_list()) lists.push_back(&n);
      else if (n.o->blocks) blocks = blocks ? blocks : &n;
      else single = &n;
    }
    if (single)
      for (const Named* l : lists)
        shapes_match(st, *single->t, slot_name(single->slot), *l->t, slot_name(l->slot), rank);
    if (lists.size() == 2 && this_pass(*lists[1]->t, *lists[0]->t, rank)) {
      const TensorSpec &a = *lists[1]->t, &b = *lists[0]->t;  // output, then list, as written
      const int r = rank.value_or(0);
      if (a.dtype != b.dtype || a.count_on(r) != b.count_on(r))
        fail(st.where, "mismatched shapes: each entry of " + std::string(slot_name(lists[1]->slot)) + " '" + a.name +
                           "' is " + shape_of(a, r) + " but each entry of " + std::string(slot_name(lists[0]->slot)) +
                           " '" + b.name + "' is " + shape_of(b, r) + (rank ? " on rank " + std::to_string(r) : std::string()));
    }
    if (blocks && !rank) {
      for (const Named& n : named) {
        if (&n == blocks || n.o->is_list() || n.t->dtype == blocks->t->dtype) continue;
        const Named& out = n.slot == Slot::kOutput ? n : *blocks;
        const Named& in = n.slot == Slot::kOutput ? *blocks : n;
        fail(st.where, "output '" + out.t->name + "' is " + std::string(dtype_name(out.t->dtype)) + " but tensor '" +
                           in.t->name + "' is " + std::string(dtype_name(in.t->dtype)));
      }
    }
  }

  // A print step's text: every field names something and every tensor
  // index is in range (lists, whose length may depend on the world, are
  // checked per rank).
  void print_fields(const Step& st, const std::set<std::string>& handles) const {
    std::optional<PrintTextError> error;
    const auto parts = parse_print_text(st.text, &error);
    auto at = [&](std::size_t offset) {
      Location l = st.text_where.line > 0 ? st.text_where : st.where;
      l.column += static_cast<int>(offset);
      return l;
    };
    if (error) fail(at(error->offset), "print: " + error->message);
    for (const PrintPart& p : parts) {
      if (!p.is_field) continue;
      const std::string field = "{" + p.text + (p.source ? ".source" : "") +
                                (p.index ? "[" + std::to_string(*p.index) + "]" : "") + "}";
      if (p.source) {
        if (!handles.count(p.text)) fail(at(p.offset), "print: " + field + " names no handle of an earlier step");
        continue;
      }
      if (p.text == "rank" || p.text == "world") {
        if (p.index) fail(at(p.offset), "print: " + field + ": " + p.text + " is a number, it has no elements");
        continue;
      }
      const TensorSpec* t = s_.find_tensor(p.text);
      if (!t) {
        std::vector<std::string> names = {"rank", "world"};
        for (const auto& x : s_.tensors) names.push_back(x.name);
        fail(at(p.offset), "print: " + field +
                               " names nothing (fields: rank, world, a tensor or list, HANDLE.source)" +
                               did_you_mean(p.text, names));
      }
      if (t->per_rank) continue;  // checked per rank (print_lists)
      if (!t->list && p.index && t->shape.size() >= 2 && *p.index >= static_cast<std::size_t>(t->shape[0]))
        fail(at(p.offset), "print: " + field + ": tensor '" + t->name + "' has " + std::to_string(t->shape[0]) +
                               " rows");
      if (!t->list && p.index && t->shape.size() < 2 && *p.index >= t->count())
        fail(at(p.offset), "print: " + field + ": tensor '" + t->name + "' has " + std::to_string(t->count()) +
                               " elements");
      if (p.repr && !p.index) fail(at(p.offset), "print: " + field + ": !r takes an element, " + p.text + "[k]");
    }
  }

  // Names: every tensor, list, group and handle a step refers to exists and
  // is of the right sort; new groups and handles are not defined twice.
  void names(const std::vector<Step>& prog) {
    std::set<std::string> groups;
    for (const auto& g : s_.groups) groups.insert(g.name);
    std::set<std::string> handles;
    std::map<std::string, Location> destroyed;     // group -> its destroy_group step
    std::map<std::string, std::string> in_flight;  // handle not yet waited for -> its op's group
    for (const Step& st : prog) errors_.attempt([&] {
      if (!st.group.empty() && st.group != "world" && !groups.count(st.group)) {
        if (auto d = destroyed.find(st.group); d != destroyed.end())
          fail(st.where, "group '" + st.group + "' was destroyed at line " + std::to_string(d->second.line) +
                             "; no step may use it after that");
        std::vector<std::string> known(groups.begin(), groups.end());
        fail(st.where, "unknown group '" + st.group + "'" +
                           (known.empty() ? std::string(" (no groups are defined)") : did_you_mean(st.group, known)));
      }
      switch (st.kind) {
        case StepKind::kOp:
          operands(st);
          break;
        case StepKind::kExpect:
          if (!st.tensor.empty()) {
            const TensorSpec& t = any_tensor(st, st.tensor);
            if (!st.equals.empty() && !t.per_rank && st.equals.size() != t.count())
              fail(st.where, "mismatched shapes: tensor '" + st.tensor + "' has " + std::to_string(t.count()) +
                                 " elements per tensor but 'equals' lists " + std::to_string(st.equals.size()));
          }
          if (!st.handle.empty() && !handles.count(st.handle)) fail(st.where, "unknown handle '" + st.handle + "'");
          break;
        case StepKind::kUpdate:
          any_tensor(st, st.tensor);
          break;
        case StepKind::kWait:
          for (const auto& h : st.handles)
            if (!handles.count(h)) {
              std::vector<std::string> known(handles.begin(), handles.end());
              fail(st.where, "unknown handle '" + h + "'" +
                                 (known.empty() ? std::string(" (no async op before this step names one)")
                                                : did_you_mean(h, known)));
            }
          break;
        case StepKind::kNewGroup:
          if (st.name == "world" || groups.count(st.name)) fail(st.where, "group '" + st.name + "' is defined twice");
          groups.insert(st.name);
          destroyed.erase(st.name);
          break;
        case StepKind::kDestroyGroup:
          // torch leaves destroying a group with work in flight undefined.
          for (const auto& [h, g] : in_flight)
            if (g == st.group)
              fail(st.where, "destroy_group of group '" + st.group + "' while handle '" + h +
                                 "' (an op on it) is not waited for; wait for it first (torch leaves destroying "
                                 "a group with work in flight undefined)");
          groups.erase(st.group);
          destroyed[st.group] = st.where;
          break;
        case StepKind::kPrint:
          print_fields(st, handles);
          break;
      }
      if (!st.handle.empty() && st.kind == StepKind::kOp && !handles.insert(st.handle).second)
        fail(st.where, "handle '" + st.handle + "' is defined twice in this program");
      if (!st.handle.empty() && st.kind == StepKind::kOp) in_flight[st.handle] = st.group;
      if (st.kind == StepKind::kWait)
        for (const auto& h : st.handles) in_flight.erase(h);
    });
  }

  // Groups, per-rank programs, list counts, faults and the outcome against
  // the world size.
  void world() {
    for (const auto& g : s_.groups) errors_.attempt([&] {
      if (g.ranks.empty()) fail(g.where, "group '" + g.name + "' has no ranks");
      std::set<int> seen;
      for (int r : g.ranks) {
        if (r < 0 || r >= world_)
          fail(g.ranks_where.line > 0 ? g.ranks_where : g.where,
               "rank " + std::to_string(r) + " in group '" + g.name + "' is out of range for world " +
                   std::to_string(world_));
        if (!seen.insert(r).second) fail(g.where, "rank " + std::to_string(r) + " is listed twice in group '" + g.name + "'");
      }
      groups_[g.name] = std::vector<int>(seen.begin(), seen.end());
    });
    errors_.attempt([&] { world_rest(); });
  }

  // Per-rank programs, list counts, faults and the outcome.
  void world_rest() {
    for (const auto& [rank, where] : s_.program_where)
      if (rank < 0 || rank >= world_)
        fail(where, "program for rank " + std::to_string(rank) + " is out of range for world " + std::to_string(world_));
    for (const auto& t : s_.tensors) {
      if (!t.list) continue;
      const Value n = t.list->eval(vars_for(0, world_));
      if (!whole_in(n, 0, 1000000))
        fail(t.where, "list of tensor '" + t.name + "' must be a count between 0 and 1000000, not " + as_written(n));
    }
    auto fault_rank = [&](int r, const std::string& what) {
      if (r >= world_)
        fail(s_.where, "fault: " + what + " " + std::to_string(r) + " is out of range for world " + std::to_string(world_));
    };
    for (const auto& f : s_.faults.messages) {
      fault_rank(f.src, "src");
      fault_rank(f.dst, "dst");
    }
    for (const auto& c : s_.faults.crashes) fault_rank(c.rank, "crash rank");
    for (const auto& c : s_.faults.slow) fault_rank(c.rank, "slow rank");
    for (const auto& c : s_.faults.skews) fault_rank(c.rank, "skew rank");
    for (const auto& p : s_.faults.partitions)
      for (int r : p.a) fault_rank(r, "partition rank");
    const Outcome& o = s_.outcome;
    if (o.rank && (*o.rank < 0 || *o.rank >= world_))
      fail(o.where, "outcome rank " + std::to_string(*o.rank) + " is out of range for world " + std::to_string(world_));
    for (int r : o.deadlocked_ranks)
      if (r < 0 || r >= world_)
        fail(o.where, "deadlocked rank " + std::to_string(r) + " is out of range for world " + std::to_string(world_));
  }

  // all_to_all_single's rule for one side on one rank, as torch checks it:
  // one size per group rank, summing to dim 0; without sizes, dim 0
  // divides evenly.
  static void splits_fit(const Step& st, const SplitSizes& splits, const char* key, const TensorSpec& t, int rank,
                         int world, std::size_t n, const std::string& gname) {
    const std::string on = " on rank " + std::to_string(rank);
    const std::vector<std::int64_t> shape = t.shape_on(rank);
    const std::int64_t rows = shape.empty() ? 1 : shape[0];
    if (!splits.given()) {
      if (n && rows % static_cast<std::int64_t>(n) != 0)
        fail(st.where, "tensor '" + t.name + "' has " + std::to_string(rows) + " rows in dim 0, which " + gname +
                           "'s " + std::to_string(n) + " ranks do not divide; give " + key);
      return;
    }
    const std::vector<Value> v = splits.eval(rank, world, n);
    if (v.size() != n)
      fail(splits.where, std::string(key) + " lists " + std::to_string(v.size()) + " sizes but " + gname + " has " +
                             std::to_string(n) + " ranks");
    Value::Int sum = 0;  // at most 2^20 sizes of at most 2^63: exact
    for (std::size_t j = 0; j < v.size(); ++j) {
      const auto size = whole_in(v[j], 0, INT64_MAX);
      if (!size)
        fail(splits.where, std::string(key) + "[" + std::to_string(j) + "] is " + as_written(v[j]) + on +
                               "; sizes are whole numbers of rows, at least 0");
      sum += *size;
    }
    if (sum != rows)
      fail(splits.where, std::string(key) + " sum to " + int_text(sum) + on + " but tensor '" + t.name + "' has " +
                             std::to_string(rows) + " rows in dim 0");
  }

  void tag_fits(const Step& st, const Expr& tag, const Vars& vars, const std::string& on) {
    const Value t = tag.eval(vars);
    if (!whole_in(t, 0, 2147483647))
      fail(st.where, "tag " + tag.text() + " is " + as_written(t) + on + "; tags are integers from 0 to 2147483647");
  }

  // `what` p (a global rank) is in the world and in the group.
  // Returns the rank.
  int rank_fits(const Step& st, const std::string& what, const Expr& e, const Vars& vars,
                const std::vector<int>& members, const std::string& on) {
    const Value v = e.eval(vars);
    const auto p = whole_in(v, 0, world_ - 1);
    if (!p)
      fail(st.where, what + " " + e.text() + " is " + as_written(v) + on + ", out of range for world " +
                         std::to_string(world_));
    if (!std::binary_search(members.begin(), members.end(), static_cast<int>(*p)))
      fail(st.where, what + " " + std::to_string(*p) + on + " is not a member of " + group_label(st));
    return static_cast<int>(*p);
  }

  // An op step on one rank that runs it.
  void op_on_rank(const Step& st, int r, const std::vector<int>& members) {
    const OpSpec& spec = st.spec();
    const auto vars = vars_for(r, world_);
    const std::string on = " on rank " + std::to_string(r);
    const std::string gname = group_label(st);
    const std::size_t n = members.size();
    if (spec.tag && st.tag.valid()) tag_fits(st, st.tag, vars, on);
    const bool member = std::binary_search(members.begin(), members.end(), r);
    if (!member) return;
    operands(st, r);  // shapes that depend on the rank
    int root = -1;
    if (st.peer) {
      root = rank_fits(st, spec.rooted ? "root" : std::string(spec.peer_key), *st.peer, vars, members, on);
      if (spec.kind == OpKind::kSend && !st.async && root == r)
        fail(st.where, "blocking send to itself" + on + " can never complete; use isend and irecv");
    }
    for (const P2PStep& p : st.p2p) {
      rank_fits(st, p.is_send ? "dst" : "src", p.peer, vars, members, on);
      tag_fits(st, p.tag, vars, on);
    }
    const bool is_root = spec.rooted && root == r;
    const TensorSpec* whole = nullptr;  // a tensor operand not cut into blocks
    for (std::size_t k = 0; k < kNumSlots; ++k) {
      const auto slot = static_cast<Slot>(k);
      const Operand& o = spec.operand(slot);
      if (!o.present() || st.slot(slot).empty()) continue;
      const TensorSpec& t = *s_.find_tensor(st.slot(slot));
      if (!o.is_list() && !o.blocks) whole = &t;
      if (o.is_list() && o.passed_by(is_root)) {
        const Value count = t.list->eval(vars);
        if (whole_in(count, 0, 1000000) != static_cast<std::int64_t>(n))
          fail(st.where, std::string(slot_name(slot)) + " '" + t.name + "' has " + as_written(count) +
                             " tensors but " + gname + " has " + std::to_string(n) + " ranks");
      }
    }
    for (std::size_t k = 0; k < kNumSlots; ++k) {
      const auto slot = static_cast<Slot>(k);
      const Operand& o = spec.operand(slot);
      if (!o.present() || !o.blocks || st.slot(slot).empty()) continue;
      const TensorSpec& t = *s_.find_tensor(st.slot(slot));
      if (spec.splits) {
        const bool input = o.reads != Ranks::kNone;
        splits_fit(st, input ? st.input_splits : st.output_splits, input ? "input_split_sizes" : "output_split_sizes",
                   t, r, world_, n, gname);
      } else if (whole && static_cast<Value::Int>(t.count_on(r)) != static_cast<Value::Int>(n) * whole->count_on(r)) {
        fail(st.where, std::string(slot_name(slot)) + " '" + t.name + "' has " + std::to_string(t.count_on(r)) +
                           " elements" + (t.per_rank || whole->per_rank ? on : std::string()) + " but " + gname +
                           " has " + std::to_string(n) + " ranks of " + std::to_string(whole->count_on(r)) +
                           " (give it shape [" + std::to_string(n * whole->count_on(r)) + "], or an expression of world)");
      }
    }
  }

  void per_rank(const std::vector<Step>& prog, std::optional<int> only_rank) {
    auto groups = groups_;
    for (const Step& st : prog) errors_.attempt([&] {
      if (st.ranks)
        for (int r : *st.ranks)
          if (r < 0 || r >= world_)
            fail(st.where, "rank " + std::to_string(r) + " in 'ranks' is out of range for world " + std::to_string(world_));
      if (st.kind == StepKind::kNewGroup) {
        std::set<int> seen;
        for (int r : st.members) {
          if (r < 0 || r >= world_)
            fail(st.where, "rank " + std::to_string(r) + " in members is out of range for world " + std::to_string(world_));
          if (!seen.insert(r).second) fail(st.where, "rank " + std::to_string(r) + " is listed twice in members");
        }
        if (seen.empty()) fail(st.where, "new_group needs at least one member");
        groups[st.name] = std::vector<int>(seen.begin(), seen.end());
        return;
      }
      if (st.kind == StepKind::kDestroyGroup) return;
      std::vector<int> members;
      if (st.group.empty() || st.group == "world") {
        for (int r = 0; r < world_; ++r) members.push_back(r);
      } else {
        members = groups[st.group];
      }
      if (st.kind == StepKind::kOp) op_once(st);
      for (int r = 0; r < world_; ++r) {
        if (only_rank && r != *only_rank) continue;
        if (st.ranks && std::find(st.ranks->begin(), st.ranks->end(), r) == st.ranks->end()) continue;
        const auto vars = vars_for(r, world_);
        if (st.when && !st.when->eval(vars).truthy()) continue;
        if (st.kind == StepKind::kOp) op_on_rank(st, r, members);
        if (st.kind == StepKind::kPrint) print_lists(st, vars, r);
        if (st.kind == StepKind::kExpect && !st.equals.empty()) {
          const TensorSpec& t = *s_.find_tensor(st.tensor);
          if (t.per_rank && st.equals.size() != t.count_on(r))
            fail(st.where, "mismatched shapes: tensor '" + st.tensor + "' has " + std::to_string(t.count_on(r)) +
                               " elements on rank " + std::to_string(r) + " but 'equals' lists " +
                               std::to_string(st.equals.size()));
        }
        if (st.source) {
          if (!whole_in(st.source->eval(vars), 0, world_ - 1))
            fail(st.where, "source " + st.source->text() + " is out of range for world " + std::to_string(world_));
        }
      }
    });
  }

  // What an op step must satisfy whatever the rank: its reduce op is
  // defined for the dtype it reduces, its forced algorithm implements it.
  void op_once(const Step& st) {
    const OpSpec& spec = st.spec();
    if (spec.reduce_op) {
      // The operand the op writes holds the reduction.
      for (std::size_t k = 0; k < kNumSlots; ++k) {
        const auto slot = static_cast<Slot>(k);
        if (spec.operand(slot).writes == Ranks::kNone || st.slot(slot).empty()) continue;
        if (auto why = reduce_op_unsupported(st.reduce_op, s_.find_tensor(st.slot(slot))->dtype)) fail(st.where, *why);
        break;
      }
    }
    if (st.algorithm != Algorithm::kAuto && !algorithm_supports(st.algorithm, spec.collective))
      fail(st.where, "algorithm '" + std::string(algorithm_name(st.algorithm)) + "' does not implement " + st.kind_name());
  }

  // print {l[k]} of a list: k within the list's length on this rank.
  void print_lists(const Step& st, const Vars& vars, int r) const {
    std::optional<PrintTextError> error;
    for (const PrintPart& p : parse_print_text(st.text, &error)) {
      const TensorSpec* l = p.is_field && p.index && !p.source ? s_.find_tensor(p.text) : nullptr;
      if (l && !l->list && l->per_rank) {  // a tensor whose shape depends on the rank
        const std::vector<std::int64_t> shape = l->shape_on(r);
        const bool rows = shape.size() >= 2;
        const std::size_t n = rows ? static_cast<std::size_t>(shape[0]) : l->count_on(r);
        Location where = st.text_where.line > 0 ? st.text_where : st.where;
        where.column += static_cast<int>(p.offset);
        if (*p.index >= n)
          fail(where, "print: {" + p.text + "[" + std::to_string(*p.index) + "]}: tensor '" + l->name + "' has " +
                          std::to_string(n) + (rows ? " rows" : " elements") + " on rank " + std::to_string(r));
        continue;
      }
      if (!l || !l->list) continue;
      const Value n = l->list->eval(vars);
      Location where = st.text_where.line > 0 ? st.text_where : st.where;
      where.column += static_cast<int>(p.offset);
      if (static_cast<std::int64_t>(*p.index) >= whole_in(n, 0, 1000000).value_or(0))
        fail(where, "print: {" + p.text + "[" + std::to_string(*p.index) + "]}: list '" + l->name + "' has " +
                        as_written(n) + " tensors on rank " + std::to_string(r));
    }
  }

  const Scenario& s_;
  const int world_;
  std::map<std::string, std::vector<int>> groups_;  // the file's groups, sorted
  ScenarioErrors errors_;
};

}  // namespace

void check_program(const Scenario& s) { ProgramChecks(s).run(); }

namespace {

// Evaluates `e` as `store` in the interpreter would for element values of
// `dtype`: over the ranks, list entries and elements given, each only when
// the expression uses its variable.
void evaluate_all(const Expr& e, DType dtype, const std::vector<int>& ranks, int world,
                  const std::function<std::int64_t(int rank)>& entries, const TensorSpec& t) {
  const bool by_rank = e.uses("rank"), by_j = e.uses("j"), by_i = e.uses("i");
  std::int64_t covered = 0;  // entries evaluated already, when the value does not depend on the rank
  for (int r : ranks) {
    const std::size_t elements = t.count_on(r);
    if (!by_rank && t.per_rank) covered = 0;  // other elements on another rank
    const std::int64_t n = by_j ? entries(r) : std::min<std::int64_t>(entries(r), 1);
    for (std::int64_t j = by_rank ? 0 : covered; j < n; ++j) {
      for (std::size_t i = 0; i < (by_i ? elements : std::min<std::size_t>(elements, 1)); ++i) {
        const Vars v = {{"rank", r}, {"world", world}, {"j", j}, {"i", i}};
        const Value x = e.eval(v);
        if (auto why = value_unfit(dtype, x))
          throw ScenarioError(e.where(), "in expression " + Expr::quoted(e.text()) + ": " + *why + " with " +
                                             Expr::describe_vars(v));
      }
    }
    covered = std::max(covered, n);
  }
}

}  // namespace

void check_values(const Scenario& s) {
  if (s.timing_only) return;
  std::vector<int> every;
  for (int r = 0; r < s.world; ++r) every.push_back(r);
  auto entries_of = [&](const TensorSpec& t) {
    return std::function<std::int64_t(int)>([&t, &s](int r) -> std::int64_t {
      return t.list ? t.list->eval(vars_for(r, s.world)).whole().value_or(0) : 1;
    });
  };
  for (const TensorSpec& t : s.tensors)
    if (t.values.empty()) evaluate_all(t.init, t.dtype, every, s.world, entries_of(t), t);
  auto expects = [&](const std::vector<Step>& prog, std::optional<int> only) {
    for (const Step& st : prog) {
      if (st.kind != StepKind::kExpect || !st.has_value || st.tensor.empty()) continue;
      const TensorSpec* t = s.find_tensor(st.tensor);
      if (!t) continue;
      std::vector<int> ranks;
      for (int r = 0; r < s.world; ++r) {
        if (only && r != *only) continue;
        if (st.ranks && std::find(st.ranks->begin(), st.ranks->end(), r) == st.ranks->end()) continue;
        if (st.when && !st.when->eval(vars_for(r, s.world)).truthy()) continue;
        ranks.push_back(r);
      }
      evaluate_all(st.value, t->dtype, ranks, s.world, entries_of(*t), *t);
    }
  };
  expects(s.program, std::nullopt);
  for (const auto& [rank, prog] : s.programs) expects(prog, rank);
}

}  // namespace collie::scenario
