// Integers near the edges of int64, int32, uint8 and int8 (and of a
// double's exact range, 2^53), written as literals, computed by init and
// update expressions, wrapped by a collective's SUM and compared by expect
// steps: every one is exact, or refused where it is written -- never
// rounded through a double (issue #26: 9007199254740993 loaded as ...992,
// x + 1 on 2^60 did nothing, an expect of 2^60 + 1 passed against 2^60).
// Built into fuzz_test (cmake/FuzzTests.cmake), with the sanitizers.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <iterator>
#include <string>

#include "scenario/loader.h"
#include "scenario/runner.h"
#include "scenario/scenario.h"
#include "scenario/value.h"

namespace collie::scenario {
namespace {

using Int = Value::Int;

struct Dtype {
  const char* name;
  Int lo, hi;
  int bits;
};

const Dtype kDtypes[] = {
    {"int8", -128, 127, 8},
    {"uint8", 0, 255, 8},
    {"int32", INT32_MIN, INT32_MAX, 32},
    {"int64", INT64_MIN, INT64_MAX, 64},
};

// An integer within a few of an edge: of the dtype, of another dtype, of a
// double's exact integers, or of 0.
Int near_edge(const Dtype& d) {
  const Int two53 = static_cast<Int>(1) << 53;
  const Int edges[] = {d.lo, d.hi, 0, two53, -two53, INT64_MAX, INT64_MIN, 255, -128, 127, static_cast<Int>(1) << 60};
  return edges[*rc::gen::inRange<std::size_t>(0, std::size(edges))] + *rc::gen::inRange<int>(-3, 4);
}

const Dtype& any_dtype() { return kDtypes[*rc::gen::inRange<std::size_t>(0, std::size(kDtypes))]; }

bool fits(const Dtype& d, Int v) { return v >= d.lo && v <= d.hi; }

// What the dtype's arithmetic gives for the exact sum: wrapped modulo 2^bits.
Int wrapped(const Dtype& d, Int v) {
  const Int m = static_cast<Int>(1) << d.bits;
  Int r = v % m;
  if (r < 0) r += m;
  if (d.lo < 0 && r > d.hi) r -= m;
  return r;
}

std::string text(Int v) { return int_text(v); }

std::string scenario(int world, const std::string& tensor, const std::string& program) {
  return "version: 1\nname: x\nworld: " + std::to_string(world) + "\ntensors:\n  t: " + tensor + "\nprogram:\n" + program;
}

// The lines the ranks printed, joined by '|' (ranks print in seed order).
std::string printed(const ScenarioResult& r) {
  std::string s;
  for (const auto& l : r.output) s += (s.empty() ? "" : "|") + l.text;
  return s;
}

RC_GTEST_PROP(ExactIntegersFuzz, LiteralsLoadExactlyOrAreRefusedWhereWritten, ()) {
  const Dtype& d = any_dtype();
  const Int v = near_edge(d);
  const std::string head = std::string("{dtype: ") + d.name + ", values: [";
  const std::string yaml = scenario(1, head + text(v) + "]}",
                                    "  - {op: print, text: \"{t[0]}\"}\n  - {op: expect, tensor: t, equals: [" +
                                        text(v) + "]}\n");
  if (!fits(d, v)) {
    try {
      (void)load_text(yaml, "v.yaml");
      RC_FAIL("loaded " + text(v) + " into " + d.name);
    } catch (const ScenarioError& e) {
      // At the literal: line 5, after "  t: " and the head.
      RC_ASSERT(e.where().line == 5);
      RC_ASSERT(e.where().column == static_cast<int>(5 + head.size() + 1));
      RC_ASSERT(std::string(e.what()).find(text(v) + " does not fit " + d.name) != std::string::npos);
    }
    return;
  }
  const ScenarioResult r = run_scenario(load_text(yaml, "v.yaml"), {});
  RC_ASSERT(r.passed);
  RC_ASSERT(printed(r) == text(v));
  // One more or one less is another value: its expect fails, naming both.
  const Int w = v + *rc::gen::element<int>(-1, 1);
  if (!fits(d, w)) return;
  const ScenarioResult wrong =
      run_scenario(load_text(scenario(1, head + text(v) + "]}", "  - {op: expect, tensor: t, equals: [" + text(w) + "]}\n"),
                             "v.yaml"),
                   {});
  RC_ASSERT(!wrong.passed);
  RC_ASSERT(wrong.failures.front().find("element 0 is " + text(v) + ", expected " + text(w)) != std::string::npos);
}

RC_GTEST_PROP(ExactIntegersFuzz, InitAndUpdateExpressionsComputeExactly, ()) {
  const Dtype& d = any_dtype();
  const Int v = near_edge(d);
  // v as a + b with a anywhere near an edge: the sum is exact or refused.
  const Int a = near_edge(any_dtype());
  const Int b = v - a;
  const bool by_update = *rc::gen::arbitrary<bool>();
  std::string tensor, program;
  if (by_update) {
    if (!fits(d, a)) return;  // the initial value must fit
    tensor = std::string("{dtype: ") + d.name + ", init: \"" + text(a) + "\"}";
    program = "  - {op: update, tensor: t, value: \"x + (" + text(b) + ")\"}\n";
  } else {
    tensor = std::string("{dtype: ") + d.name + ", init: \"" + text(a) + " + (" + text(b) + ")\"}";
  }
  program += "  - {op: print, text: \"{t[0]}\"}\n  - {op: expect, tensor: t, value: \"" + text(v) + "\"}\n";
  const Scenario s = load_text(scenario(1, tensor, program), "v.yaml");
  try {
    const ScenarioResult r = run_scenario(s, {});
    RC_ASSERT(fits(d, v));
    RC_ASSERT(r.passed);
    RC_ASSERT(printed(r) == text(v));
  } catch (const ScenarioError& e) {
    // Refused at the expression that made it, saying so exactly.
    RC_ASSERT(!fits(d, v));
    RC_ASSERT(e.where().line == (by_update ? 7 : 5));
    RC_ASSERT(std::string(e.what()).find(": " + text(v) + " does not fit " + d.name) != std::string::npos);
  }
}

RC_GTEST_PROP(ExactIntegersFuzz, ASumWrapsAsTheDtypesArithmeticAndExpectComparesExactly, ()) {
  const Dtype& d = any_dtype();
  Int x = near_edge(d), y = near_edge(d);
  if (!fits(d, x) || !fits(d, y)) return;
  const Int sum = wrapped(d, x + y);
  const std::string tensor = std::string("{dtype: ") + d.name + ", init: \"" + text(x) + " if rank == 0 else " + text(y) + "\"}";
  const std::string program = "  - {op: all_reduce, tensor: t}\n  - {op: print, text: \"{t[0]}\"}\n"
                              "  - {op: expect, tensor: t, equals: [" + text(sum) + "]}\n";
  const ScenarioResult r = run_scenario(load_text(scenario(2, tensor, program), "v.yaml"), {});
  RC_ASSERT(r.passed);
  RC_ASSERT(printed(r) == text(sum) + "|" + text(sum));
  // The neighbouring value fails the same expect.
  const Int other = sum == d.hi ? sum - 1 : sum + 1;
  const std::string program2 = "  - {op: all_reduce, tensor: t}\n  - {op: expect, tensor: t, value: \"" + text(other) + "\"}\n";
  RC_ASSERT(!run_scenario(load_text(scenario(2, tensor, program2), "v.yaml"), {}).passed);
}

// Shapes whose product of dimensions overflows (issue #26: [65536, 65536,
// 65536, 65536] wrapped to 0 elements and validated; [3, 2^31, 2^31] wrote
// out of bounds). Any shape of dimensions within 0..2^31, as numbers or as
// expressions of world: it loads with exactly the product of its
// dimensions as elements, or -- when its bytes pass kMaxTensorBytes -- is
// refused at the shape, naming the exact count. Never a wrapped count.
RC_GTEST_PROP(ShapesFuzz, AShapeHoldsItsExactProductOrIsRefusedAtTheShape, ()) {
  const int world = *rc::gen::inRange(1, 5);
  const auto dims = *rc::gen::container<std::vector<std::int64_t>>(
      *rc::gen::inRange<std::size_t>(1, 7),
      rc::gen::oneOf(rc::gen::element<std::int64_t>(0, 1, 3, 65536, 1 << 20, (std::int64_t{1} << 31) - 1,
                                                    std::int64_t{1} << 31),
                     rc::gen::inRange<std::int64_t>(0, 5000)));
  const Dtype& d = any_dtype();
  const std::int64_t dtype_bytes = d.bits / 8;
  std::string shape;
  Int exact = 1;
  bool beyond = false;  // past 2^64 elements
  for (std::int64_t v : dims) {
    // A dimension as a number, or as an expression of world that gives it.
    const bool expr = *rc::gen::arbitrary<bool>();
    shape += (shape.empty() ? "" : ", ") +
             (expr ? "\"" + std::to_string(v) + " + world - " + std::to_string(world) + "\"" : std::to_string(v));
    if (!beyond && __builtin_mul_overflow(exact, static_cast<Int>(v), &exact)) beyond = true;
    beyond = beyond || exact > static_cast<Int>(UINT64_MAX);
  }
  bool zero = false;
  for (std::int64_t v : dims) zero = zero || v == 0;
  if (zero) {
    beyond = false;
    exact = 0;
  }
  const bool fits = !beyond && exact * dtype_bytes <= static_cast<Int>(kMaxTensorBytes);
  const std::string head = std::string("{dtype: ") + d.name + ", shape: ";
  const std::string yaml = scenario(world, head + "[" + shape + "]}", "  - {op: barrier}\n");
  try {
    const Scenario s = load_text(yaml, "v.yaml");
    RC_ASSERT(fits);
    RC_ASSERT(static_cast<Int>(s.tensors.at(0).count()) == exact);
  } catch (const ScenarioError& e) {
    RC_ASSERT(!fits);
    RC_ASSERT(e.where().line == 5);
    RC_ASSERT(e.where().column == static_cast<int>(5 + head.size() + 1));
    RC_ASSERT(std::string(e.what()).find(beyond ? std::string("more than 2^64") : int_text(exact)) != std::string::npos);
  }
}

}  // namespace
}  // namespace collie::scenario
