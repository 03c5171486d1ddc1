// The one comparator: is a tensor an op produced the one the oracle (or the
// sender) says it must be?
//
// Equal means bit for bit, except where the rule allows rounding: a
// floating SUM, AVG or PRODUCT of `contributors` operands may be combined in
// any order by a correct implementation, and with three or more operands
// each order rounds differently, so such results are equal within
// 2 x contributors x epsilon of the larger magnitude (for sums, of the sum of
// the operands' magnitudes when the rule has it: cancellation). Two operands combine
// once, with one rounding whatever the order: exact (a bfloat16 SUM that
// truncates instead of rounding to nearest even fails here). Unless the rule is bitwise, NaN equals NaN whatever its sign
// or payload bits, and -0.0 equals +0.0.
#pragma once

#include <string>

#include "core/reduce_op.h"
#include "core/tensor.h"

namespace collie::check {

struct CompareRule {
  // The result combines this many operands with `op` (a reduction), or is
  // moved unchanged (false: exact).
  bool reduced = false;
  ReduceOp op = ReduceOp::kSum;
  int contributors = 1;
  // Bytes must be identical: no -0.0 == +0.0, no NaN == NaN (a message
  // moved unchanged).
  bool bitwise = false;
  // Call it "expected" or "the oracle says" in the message.
  const char* want_is = "expected";
  // SUM and AVG only: per element, the sum of the operands' magnitudes
  // (sum |x_i|). Under cancellation a sum's rounding error scales with it,
  // not with the result, so the allowance becomes 2 x contributors x
  // epsilon x this (of the average's dtype scale for AVG). Null: the
  // result's magnitude.
  const Tensor* magnitudes = nullptr;
};

// Empty when `got` equals `want` under `rule`; otherwise the first
// difference: "element 3 is 2.0, the oracle says 4.0" or "has 4 elements,
// expected 5". `element`, when given, receives the index of the element
// that differs (left alone for a dtype or count that differs).
std::string compare_tensors(const Tensor& got, const Tensor& want, const CompareRule& rule = {},
                            std::size_t* element = nullptr);

// The rounding a floating dtype allows per combination (its epsilon; 0 for
// the exact dtypes).
double epsilon(DType t);

}  // namespace collie::check
