// A number of a scenario file, as Python has it: an exact integer or a
// double (a float). Literals, expressions, tensor elements and expected
// values are Values, so that an integer stays exact from the file to the
// tensor and back: 9007199254740993 (2^53 + 1) is that integer, not the
// double 9007199254740992.
//
// Integers are exact within 128 bits, -2^127 to 2^127 - 1: wider than every
// dtype (int64 and its sums and products of two). Python's integers have no
// bound; where an exact result lies beyond 128 bits collie refuses it (a
// ScenarioError at the expression) rather than round it. Floats are IEEE
// doubles with Python's semantics.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"

namespace collie {
class Tensor;
}

namespace collie::scenario {

class Value {
 public:
  __extension__ typedef __int128 Int;
  __extension__ typedef unsigned __int128 UInt;
  static constexpr Int kIntMax = static_cast<Int>((static_cast<UInt>(1) << 127) - 1);
  static constexpr Int kIntMin = -kIntMax - 1;

  Value() = default;  // the integer 0
  // Integers are Values as they are (rank, world, i, and Python's True = 1).
  template <std::integral T>
  Value(T v) : int_(static_cast<Int>(v)) {}  // NOLINT: an integer is a Value
  static Value integer(Int v) {
    Value x;
    x.int_ = v;
    return x;
  }
  // A float: never made implicitly, so that 0 stays an integer.
  static Value real(double v) {
    Value x;
    x.is_int_ = false;
    x.real_ = v;
    return x;
  }

  bool is_int() const { return is_int_; }
  Int integer() const { return int_; }  // requires is_int()
  double real() const { return real_; }  // requires !is_int()
  // As Python's float(): an integer rounded to the nearest double.
  double to_double() const { return is_int_ ? static_cast<double>(int_) : real_; }
  // Python's bool(): nonzero (a NaN is true).
  bool truthy() const { return is_int_ ? int_ != 0 : real_ != 0; }
  // The value as an int64 when it is a whole number in range (an integer,
  // or a float such as 4.0); nullopt otherwise (2.5, nan, 2**70).
  std::optional<std::int64_t> whole() const;
  // Python's repr: "3", "-9223372036854775808", "2.5", "1e+20", "nan".
  std::string str() const;

 private:
  bool is_int_ = true;
  Int int_ = 0;
  double real_ = 0;
};

// Python's comparison of two numbers, exact across int and float (2**53 + 1
// > 2.0**53): -1, 0 or 1, or nullopt when unordered (a NaN).
std::optional<int> compare(const Value& a, const Value& b);

// "170141183460469231731687303715884105727": an Int in decimal.
std::string int_text(Value::Int v);

// A numeric literal at the start of `text`, Python's syntax: integers in
// decimal (1_000), hex (0x1F), octal (0o17) and binary (0b101), exactly;
// floats (2.5, .5, 5., 1e-3) as the nearest double (1e400 is inf). Sets
// `length` to the characters it took. nullopt when `text` does not start
// with a literal, with `error` saying why when it starts like one but is
// malformed (01, 0x, 1__0, 1e) or an integer beyond 128 bits.
// `leading_zeros`: 007 is 7 (YAML's decimal integers), not an error (Python).
std::optional<Value> scan_number(std::string_view text, std::size_t& length, std::string& error,
                                 bool leading_zeros = false);

// ---- Values as tensor elements ---------------------------------------------
//
// How a Value becomes an element, as torch converts a Python number into a
// tensor of a dtype (torch.tensor(v, dtype=...), t.fill_(v)):
//   - an integer dtype takes an integer exactly, and a float truncated
//     toward zero (2.7 -> 2, -2.7 -> -2); a value outside the dtype's range
//     (256 or -1 into uint8, 2**63 into int64), a NaN or an infinity is
//     refused, as torch refuses it ("value cannot be converted to type
//     uint8_t without overflow") -- never wrapped;
//   - a floating dtype takes the nearest value it has (overflow is inf);
//   - bool takes v != 0.
// Arithmetic on tensors -- a collective's SUM of int64 -- wraps modulo
// 2^bits, as torch's does; that is the ops', not the conversion's.

// Why `v` cannot be an element of `dtype` ("256 does not fit uint8 (0 to
// 255)"), or nullopt when it can.
std::optional<std::string> value_unfit(DType dtype, const Value& v);
// Stores `v` as element i of `t`; requires !value_unfit(t.dtype(), v).
void store_element(Tensor& t, std::size_t i, const Value& v);
// Element i of `t` as a Value: an integer for integer dtypes and bool
// (exactly, int64 too), a float for floating dtypes.
Value element_value(const Tensor& t, std::size_t i);

}  // namespace collie::scenario
