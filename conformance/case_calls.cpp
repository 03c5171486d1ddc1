#include "conformance/case_calls.h"

#include <algorithm>
#include <cstring>

namespace collie::conformance {

namespace {

// A tensor of `count` elements: rows of `row` elements when it is set (and
// divides the count), a 0-d scalar when row is -1 and count 1, else 1-D.
Tensor of_count(DType dtype, std::size_t count, std::int64_t row) {
  const auto n = static_cast<std::int64_t>(count);
  if (row > 0 && n % row == 0) return Tensor(dtype, {n / row, row});
  if (row < 0 && n == 1) return Tensor(dtype, {});
  return Tensor(dtype, {n});
}

Tensor sentinel(DType dtype, std::size_t count, std::int64_t row) {
  Tensor t = of_count(dtype, count, row);
  for (std::size_t i = 0; i < t.count(); ++i) t.set(i, kSentinel);
  return t;
}

Tensor concat(const std::vector<Tensor>& blocks, DType dtype, std::int64_t row) {
  std::size_t total = 0;
  for (const Tensor& b : blocks) total += b.count();
  Tensor t = of_count(dtype, total, row);
  std::size_t at = 0;
  for (const Tensor& b : blocks) {
    if (b.bytes()) std::memcpy(static_cast<std::byte*>(t.data()) + at, b.data(), b.bytes());
    at += b.bytes();
  }
  return t;
}

}  // namespace

std::vector<int> case_members(const CollectiveCase& c, int world) {
  std::vector<int> m = c.group;
  if (m.empty())
    for (int r = 0; r < world; ++r) m.push_back(r);
  std::sort(m.begin(), m.end());
  return m;
}

CaseCall case_call(const CollectiveCase& c, int rank, int world) {
  const std::vector<int> members = case_members(c, world);
  const auto n = static_cast<int>(members.size());
  const auto at = std::find(members.begin(), members.end(), rank);
  // A rank outside the group makes group rank 0's call over its own buffers.
  const int g = at == members.end() ? 0 : static_cast<int>(at - members.begin());
  CaseCall out;
  DistCall& call = out.call;
  call.kind = c.op_kind();
  call.async = c.async_op;
  const OpSpec& spec = call.spec();
  call.peer = spec.rooted ? c.root : -1;
  call.reduce_op = c.reduce_op;
  call.algorithm = c.algorithm;
  const bool is_root = spec.rooted && c.root == rank;
  // Each block of a slot: its element count and, for inputs, its values
  // (block i of group rank g is what fill_inputs makes for list index i;
  // a whole tensor is list index -1). all_to_all's blocks may differ.
  const bool uneven = c.uneven && c.op == CollectiveKind::kAllToAll;
  auto block = [&](bool input, int i, int sender_g) {
    const int from = input ? g : i, to = input ? i : g;
    Tensor t = input ? of_count(c.dtype, uneven ? block_count(c, from, to) : c.count, c.row)
                     : sentinel(c.dtype, uneven ? block_count(c, from, to) : c.count, c.row);
    if (input) fill_inputs(t, c, sender_g, i);
    return t;
  };
  // Slot k's tensors, before the call's views are taken.
  std::vector<std::vector<Tensor>> slots(kNumSlots);
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    const Operand& o = spec.operand(static_cast<Slot>(k));
    if (!o.passed_by(is_root)) continue;
    const bool input = o.read_by(is_root);
    if (o.is_list()) {
      for (int i = 0; i < n; ++i) slots[k].push_back(block(input, i, g));
    } else if (o.blocks) {
      std::vector<Tensor> parts;
      for (int i = 0; i < n; ++i) parts.push_back(block(input, i, g));
      slots[k].push_back(concat(parts, c.dtype, c.row));
    } else if (input) {
      Tensor t = of_count(c.dtype, c.count, c.row);
      fill_inputs(t, c, g, -1);
      slots[k].push_back(std::move(t));
    } else {
      slots[k].push_back(sentinel(c.dtype, c.count, c.row));
    }
  }
  if (spec.splits && uneven) {
    for (int i = 0; i < n; ++i) {
      call.input_splits.push_back(block_count(c, g, i));
      call.output_splits.push_back(block_count(c, i, g));
    }
  }
  // Buffers first, views after: the vector no longer moves.
  std::vector<std::size_t> first(kNumSlots);
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    first[k] = out.buffers.size();
    for (Tensor& t : slots[k]) out.buffers.push_back(std::move(t));
  }
  for (std::size_t k = 0; k < kNumSlots; ++k) {
    const auto slot = static_cast<Slot>(k);
    if (!spec.operand(slot).present()) continue;
    std::vector<TensorView> views;
    for (std::size_t i = 0; i < slots[k].size(); ++i) views.push_back(out.buffers[first[k] + i].view());
    if (spec.operand(slot).is_list() || !views.empty()) call.set_views(slot, std::move(views));
  }
  return out;
}

}  // namespace collie::conformance
