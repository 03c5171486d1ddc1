// Integers stay exact from the file to the tensor and back (issue #26):
// each test is named after what went wrong when every number went through a
// double.
#include "scenario/value.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/tensor.h"
#include "scenario/loader.h"
#include "scenario/runner.h"

namespace collie::scenario {
namespace {

// Runs a world-`world` scenario with these tensors and program; returns the
// result (its printed lines in order).
ScenarioResult run_text(const std::string& tensors, const std::string& program, int world = 1) {
  const std::string text = "version: 1\nname: x\nworld: " + std::to_string(world) + "\ntensors:\n" + tensors +
                           "program:\n" + program;
  return run_scenario(load_text(text, "v.yaml"), {});
}

std::string printed(const ScenarioResult& r) {
  std::string s;
  for (const auto& l : r.output) s += (s.empty() ? "" : "|") + l.text;
  return s;
}

std::string load_error(const std::string& tensors, const std::string& program) {
  try {
    (void)load_text("version: 1\nname: x\nworld: 1\ntensors:\n" + tensors + "program:\n" + program, "v.yaml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "loaded";
}

TEST(ExactIntegers, ALiteralAbove2To53LoadedAsTheDoubleBelowIt) {
  const ScenarioResult r = run_text("  t: {dtype: int64, values: [9007199254740993]}\n",
                                    "  - {op: print, text: \"{t[0]}\"}\n"
                                    "  - {op: expect, tensor: t, equals: [9007199254740993]}\n");
  EXPECT_TRUE(r.passed) << r.failures.front();
  EXPECT_EQ(printed(r), "9007199254740993");
  // ...992 is another value: the expect must fail.
  const ScenarioResult wrong = run_text("  t: {dtype: int64, values: [9007199254740993]}\n",
                                        "  - {op: expect, tensor: t, equals: [9007199254740992]}\n");
  ASSERT_FALSE(wrong.passed);
  EXPECT_NE(wrong.failures.front().find("element 0 is 9007199254740993, expected 9007199254740992"), std::string::npos)
      << wrong.failures.front();
}

TEST(ExactIntegers, XPlusOneOn2To60DidNothing) {
  const ScenarioResult r = run_text("  t: {dtype: int64, init: \"2 ** 60\"}\n",
                                    "  - {op: update, tensor: t, value: \"x + 1\"}\n"
                                    "  - {op: print, text: \"{t[0]}\"}\n"
                                    "  - {op: expect, tensor: t, value: \"2 ** 60 + 1\"}\n");
  EXPECT_TRUE(r.passed) << r.failures.front();
  EXPECT_EQ(printed(r), "1152921504606846977");
}

TEST(ExactIntegers, AnInt64SumThatWrapsToMinPlusOneGaveMin) {
  // 2^63 - 1 + 2 wraps to -2^63 + 1 in torch's (and the core's) int64 SUM.
  const ScenarioResult r =
      run_text("  t: {dtype: int64, init: \"2 ** 63 - 1 if rank == 0 else 2\"}\n",
               "  - {op: all_reduce, tensor: t}\n"
               "  - {op: print, text: \"{t[0]}\"}\n"
               "  - {op: expect, tensor: t, equals: [-9223372036854775807]}\n"
               "  - {op: expect, tensor: t, value: \"-2 ** 63 + 1\"}\n",
               2);
  EXPECT_TRUE(r.passed) << r.failures.front();
  EXPECT_EQ(printed(r), "-9223372036854775807|-9223372036854775807");
  const ScenarioResult wrong = run_text("  t: {dtype: int64, init: \"2 ** 63 - 1 if rank == 0 else 2\"}\n",
                                        "  - {op: all_reduce, tensor: t}\n"
                                        "  - {op: expect, tensor: t, value: \"-2 ** 63\"}\n",
                                        2);
  EXPECT_FALSE(wrong.passed);
}

TEST(ExactIntegers, AnExpectOf2To60Plus1PassedAgainst2To60) {
  for (const char* expect : {"equals: [1152921504606846977]", "value: \"2 ** 60 + 1\"", "equals: \"2 ** 60 + 1\""}) {
    const ScenarioResult r = run_text("  t: {dtype: int64, init: \"2 ** 60\"}\n",
                                      std::string("  - {op: expect, tensor: t, ") + expect + "}\n");
    ASSERT_FALSE(r.passed) << expect;
    EXPECT_NE(r.failures.front().find("element 0 is 1152921504606846976, expected 1152921504606846977"),
              std::string::npos)
        << r.failures.front();
  }
}

TEST(ExactIntegers, EightBitEdgesFitOrAreRefusedWhereWritten) {
  EXPECT_EQ(load_error("  t: {dtype: uint8, shape: [2], values: [0, 255]}\n  s: {dtype: int8, shape: [2], values: [-128, 127]}\n",
                       "  - {op: barrier}\n"),
            "loaded");
  EXPECT_EQ(load_error("  t: {dtype: uint8, values: [256]}\n", "  - {op: barrier}\n"),
            "v.yaml:5:30: error: values of tensor 't': 256 does not fit uint8 (0 to 255)");
  EXPECT_EQ(load_error("  t: {dtype: int8, values: [-129]}\n", "  - {op: barrier}\n"),
            "v.yaml:5:29: error: values of tensor 't': -129 does not fit int8 (-128 to 127)");
  EXPECT_EQ(load_error("  t: {dtype: int64, values: [9223372036854775808]}\n", "  - {op: barrier}\n"),
            "v.yaml:5:30: error: values of tensor 't': 9223372036854775808 does not fit int64 (-2**63 to 2**63 - 1)");
  // Beyond 128 bits: refused where written, never rounded.
  EXPECT_EQ(load_error("  t: {dtype: float64, values: [1" + std::string(40, '0') + "]}\n", "  - {op: barrier}\n")
                .rfind("v.yaml:5:32: error: each of values must be a number, not '1000", 0),
            0u);
  // An update past the edge is refused at the expression, not wrapped.
  const std::string text = "version: 1\nname: x\nworld: 1\ntensors:\n  t: {dtype: uint8, values: [255]}\nprogram:\n"
                           "  - {op: update, tensor: t, value: \"x + 1\"}\n";
  try {
    (void)run_scenario(load_text(text, "v.yaml"), {});
    ADD_FAILURE() << "ran";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()), "v.yaml:7:37: error: in expression 'x + 1': 256 does not fit uint8 (0 to 255) "
                                     "with i=0, j=0, rank=0, world=1, x=255");
  }
}

TEST(Values, ComparisonsAcrossIntAndFloatAreExactAsInPython) {
  const Value big = Value::integer((static_cast<Value::Int>(1) << 53) + 1);
  EXPECT_EQ(compare(big, Value::real(9007199254740992.0)), 1);
  EXPECT_EQ(compare(Value::real(9007199254740992.0), big), -1);
  EXPECT_EQ(compare(Value(3), Value::real(3.0)), 0);
  EXPECT_EQ(compare(Value(3), Value::real(3.5)), -1);
  EXPECT_EQ(compare(Value(-3), Value::real(-3.5)), 1);
  EXPECT_EQ(compare(Value(1), Value::real(INFINITY)), -1);
  EXPECT_EQ(compare(Value(1), Value::real(NAN)), std::nullopt);
  EXPECT_EQ(compare(Value::integer(Value::kIntMax), Value::real(1.7014118346046923e38)), -1);
}

TEST(Values, ScanNumberReadsPythonLiteralsExactly) {
  auto scan = [](const std::string& s) {
    std::size_t n = 0;
    std::string error;
    const auto v = scan_number(s, n, error);
    return v ? v->str() + "/" + std::to_string(n) : "error: " + error;
  };
  EXPECT_EQ(scan("9007199254740993"), "9007199254740993/16");
  EXPECT_EQ(scan("170141183460469231731687303715884105727"), "170141183460469231731687303715884105727/39");
  EXPECT_EQ(scan("170141183460469231731687303715884105728").rfind("error: the integer", 0), 0u);
  EXPECT_EQ(scan("0x7fff_ffff_ffff_ffff"), "9223372036854775807/21");
  EXPECT_EQ(scan("1_000 + 1"), "1000/5");
  EXPECT_EQ(scan("2.5e3x"), "2500.0/5");
  EXPECT_EQ(scan(".5"), "0.5/2");
  EXPECT_EQ(scan("5."), "5.0/2");
  EXPECT_EQ(scan("1e400"), "inf/5");
  EXPECT_EQ(scan("1e"), "1/1");  // the number ends before the 'e'
  EXPECT_EQ(scan("1__0").rfind("error: invalid decimal literal", 0), 0u);
  EXPECT_EQ(scan("007").rfind("error: leading zeros", 0), 0u);
  EXPECT_EQ(scan("0x").rfind("error: invalid hexadecimal literal", 0), 0u);
}

TEST(Values, ElementsConvertAsTorchConvertsAPythonNumber) {
  Tensor t(DType::kInt64, {1});
  store_element(t, 0, Value(INT64_MIN));
  EXPECT_EQ(t.get_int(0), INT64_MIN);
  EXPECT_EQ(element_value(t, 0).str(), "-9223372036854775808");
  store_element(t, 0, Value::real(-2.7));  // toward zero
  EXPECT_EQ(t.get_int(0), -2);
  EXPECT_FALSE(value_unfit(DType::kInt64, Value(INT64_MAX)));
  EXPECT_TRUE(value_unfit(DType::kInt64, Value::integer(static_cast<Value::Int>(INT64_MAX) + 1)));
  EXPECT_TRUE(value_unfit(DType::kInt64, Value::real(9223372036854775808.0)));
  EXPECT_FALSE(value_unfit(DType::kUInt8, Value::real(-0.5)));  // truncates to 0
  // An integer into float32 is rounded once, from the integer.
  Tensor f(DType::kFloat32, {1});
  const std::int64_t v = (std::int64_t{1} << 60) + (std::int64_t{1} << 36) + 1;
  store_element(f, 0, Value(v));
  EXPECT_EQ(f.get(0), static_cast<double>(static_cast<float>(v)));
}

TEST(Shapes, AProductOfDimensionsThatOverflowedPassedAsEmpty) {
  EXPECT_EQ(load_error("  t: {dtype: float32, shape: [65536, 65536, 65536, 65536]}\n", "  - {op: barrier}\n"),
            "v.yaml:5:30: error: tensor 't': shape [65536, 65536, 65536, 65536] has more than 2^64 elements of "
            "float32; a tensor holds at most 2^50 bytes (1 PiB)");
  EXPECT_EQ(load_error("  t: {dtype: float32, shape: [3, 2147483648, 2147483648]}\n", "  - {op: barrier}\n"),
            "v.yaml:5:30: error: tensor 't': shape [3, 2147483648, 2147483648] has 13835058055282163712 elements of "
            "float32; a tensor holds at most 2^50 bytes (1 PiB)");
  EXPECT_THROW(Tensor(DType::kFloat32, {3, std::int64_t{1} << 31, std::int64_t{1} << 31}), std::length_error);
  EXPECT_THROW(Tensor::phantom(DType::kInt8, {65536, 65536, 65536, 65536}), std::length_error);
}

}  // namespace
}  // namespace collie::scenario
