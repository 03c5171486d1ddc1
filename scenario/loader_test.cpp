// One test per class of bad input: each names file, line and column and
// says what was expected.
#include "scenario/loader.h"
#include "scenario/runner.h"

#include <gtest/gtest.h>

#include <cmath>

namespace collie::scenario {
namespace {

// The error text of loading `yaml` as "t.yaml", or "loaded".
std::string error_of(const std::string& yaml) {
  try {
    (void)load_text(yaml, "t.yaml");
    return "loaded";
  } catch (const ScenarioError& e) {
    return e.what();
  }
}

const char* kHead = "version: 1\nname: x\nworld: 2\n";

TEST(LoaderErrors, InvalidYamlSyntax) {
  EXPECT_EQ(error_of("version: 1\nname: [unclosed\n"), "t.yaml:3:1: error: invalid YAML: end of sequence flow not found");
}

TEST(LoaderErrors, UnknownKeyWithDidYouMean) {
  const std::string e = error_of(std::string(kHead) + "tensors:\n  t: {dtype: float32, shpe: [2]}\nprogram: []\n");
  EXPECT_EQ(e, "t.yaml:5:23: error: unknown key 'shpe' in tensor 't' (did you mean 'shape'?)");
  // Every problem is reported: the misspelt key, and so the missing program.
  EXPECT_EQ(error_of(std::string(kHead) + "progam: []\n"),
            "t.yaml:4:1: error: unknown key 'progam' in the scenario (did you mean 'program'?)\n"
            "t.yaml:1:1: error: a scenario needs 'program' (steps every rank runs) or 'programs' (steps per rank)");
}

TEST(LoaderErrors, UnknownOpWithDidYouMean) {
  EXPECT_EQ(error_of(std::string(kHead) + "program:\n  - {op: allreduce}\n"),
            "t.yaml:5:10: error: unknown op 'allreduce' (did you mean 'all_reduce'?)");
}

TEST(LoaderErrors, WrongType) {
  EXPECT_EQ(error_of("version: 1\nname: x\nworld: two\nprogram: []\n"),
            "t.yaml:3:8: error: world must be an integer, not 'two'");
  EXPECT_EQ(error_of(std::string(kHead) + "groups:\n  g: 3\nprogram: []\n"),
            "t.yaml:5:6: error: group 'g' must be a list of ranks, not '3'");
}

TEST(LoaderErrors, MissingKey) {
  EXPECT_EQ(error_of("version: 1\nworld: 2\nprogram: []\n"), "t.yaml:1:1: error: a scenario needs the key 'name'");
  EXPECT_EQ(error_of(std::string(kHead) + "tensors: {t: {dtype: float32}}\nprogram:\n  - {op: send, tensor: t}\n"),
            "t.yaml:6:5: error: a 'send' step needs the key 'dst'");
}

TEST(LoaderErrors, RankOutOfRange) {
  EXPECT_EQ(error_of(std::string(kHead) + "groups:\n  g: [0, 2]\nprogram: []\n"),
            "t.yaml:5:6: error: rank 2 in group 'g' is out of range for world 2");
  EXPECT_EQ(error_of(std::string(kHead) + "tensors: {t: {dtype: float32}}\nprogram:\n  - {op: send, tensor: t, dst: 5}\n"),
            "t.yaml:6:5: error: dst 5 is 5 on rank 0, out of range for world 2");
}

TEST(LoaderErrors, RootOutOfRangeOrOutsideTheGroup) {
  EXPECT_EQ(error_of(std::string(kHead) + "tensors: {t: {dtype: float32}}\nprogram:\n  - {op: broadcast, tensor: t, src: 2}\n"),
            "t.yaml:6:5: error: root 2 is 2 on rank 0, out of range for world 2");
  EXPECT_EQ(error_of("version: 1\nname: x\nworld: 3\ngroups: {g: [0, 1]}\ntensors: {t: {dtype: float32}}\n"
                     "program:\n  - {op: reduce, tensor: t, dst: 2, group: g}\n"),
            "t.yaml:7:5: error: root 2 on rank 0 is not a member of group 'g'");
}

TEST(LoaderErrors, UnknownGroupOrTensor) {
  EXPECT_EQ(error_of(std::string(kHead) + "groups: {pair: [0, 1]}\ntensors: {t: {dtype: float32}}\n"
                                          "program:\n  - {op: all_reduce, tensor: t, group: piar}\n"),
            "t.yaml:7:5: error: unknown group 'piar' (did you mean 'pair'?)");
  EXPECT_EQ(error_of(std::string(kHead) + "tensors: {tensor: {dtype: float32}}\nprogram:\n  - {op: all_reduce, tensor: tensr}\n"),
            "t.yaml:6:5: error: unknown tensor 'tensr' (did you mean 'tensor'?)");
  EXPECT_EQ(error_of(std::string(kHead) + "program:\n  - {op: wait, handle: h}\n"),
            "t.yaml:5:5: error: unknown handle 'h' (no async op before this step names one)");
}

TEST(LoaderErrors, MismatchedShapes) {
  EXPECT_EQ(error_of(std::string(kHead) + "tensors:\n  t: {dtype: float32, shape: [2]}\n  l: {dtype: float32, shape: [3], list: 2}\n"
                                          "program:\n  - {op: all_gather, list: l, tensor: t}\n"),
            "t.yaml:8:5: error: mismatched shapes: each entry of list 'l' is float32 x 3 but tensor 't' is float32 x 2");
  EXPECT_EQ(error_of(std::string(kHead) + "tensors:\n  t: {dtype: int32, shape: [2, 2], values: [1, 2, 3]}\nprogram: []\n"),
            "t.yaml:5:44: error: mismatched shapes: tensor 't' has 4 elements but 3 values");
  EXPECT_EQ(error_of(std::string(kHead) + "tensors: {t: {dtype: int32, shape: [2]}}\nprogram:\n  - {op: expect, tensor: t, equals: [1]}\n"),
            "t.yaml:6:5: error: mismatched shapes: tensor 't' has 2 elements per tensor but 'equals' lists 1");
}

TEST(LoaderErrors, ListLengthAgainstGroupSize) {
  EXPECT_EQ(error_of(std::string(kHead) + "tensors:\n  t: {dtype: float32}\n  l: {dtype: float32, list: 3}\n"
                                          "program:\n  - {op: scatter, tensor: t, src: 0, list: l}\n"),
            "t.yaml:8:5: error: list 'l' has 3 tensors but world has 2 ranks");
}

TEST(LoaderErrors, DuplicateNames) {
  EXPECT_EQ(error_of(std::string(kHead) + "tensors:\n  t: {dtype: float32}\n  t: {dtype: int32}\nprogram: []\n"),
            "t.yaml:6:3: error: tensor 't' is defined twice");
  EXPECT_EQ(error_of(std::string(kHead) + "groups: {g: [0]}\nprogram:\n  - {op: new_group, name: g, members: [1]}\n"),
            "t.yaml:6:5: error: group 'g' is defined twice");
  EXPECT_EQ(error_of(std::string(kHead) + "groups: {g: [0, 0]}\nprogram: []\n"),
            "t.yaml:4:10: error: rank 0 is listed twice in group 'g'");
}

TEST(LoaderErrors, DestroyGroupMisuse) {
  const std::string head = std::string(kHead) + "groups: {g: [0, 1]}\ntensors: {t: {dtype: float32}}\nprogram:\n";
  EXPECT_EQ(error_of(head + "  - {op: destroy_group, group: world}\n"),
            "t.yaml:7:32: error: the world cannot be destroyed as a group (torch's destroy_process_group() without "
            "a group ends the whole job)");
  EXPECT_EQ(error_of(head + "  - {op: destroy_group, group: g, ranks: [0]}\n"),
            "t.yaml:7:42: error: every rank destroys a group, as every rank made it (torch's rule): 'destroy_group' "
            "takes no 'ranks' or 'if'");
  EXPECT_EQ(error_of(head + "  - {op: destroy_group}\n"), "t.yaml:7:5: error: a 'destroy_group' step needs the key 'group'");
  EXPECT_EQ(error_of(head + "  - {op: destroy_group, group: h}\n"), "t.yaml:7:5: error: unknown group 'h' (did you mean 'g'?)");
  EXPECT_EQ(error_of(head + "  - {op: destroy_group, group: g}\n  - {op: all_reduce, tensor: t, group: g}\n"),
            "t.yaml:8:5: error: group 'g' was destroyed at line 7; no step may use it after that");
  EXPECT_EQ(error_of(head + "  - {op: destroy_group, group: g}\n  - {op: destroy_group, group: g}\n"),
            "t.yaml:8:5: error: group 'g' was destroyed at line 7; no step may use it after that");
  EXPECT_EQ(error_of(head + "  - {op: all_reduce, tensor: t, group: g, handle: h}\n"
                            "  - {op: destroy_group, group: g}\n  - {op: wait, handle: h}\n"),
            "t.yaml:8:5: error: destroy_group of group 'g' while handle 'h' (an op on it) is not waited for; wait "
            "for it first (torch leaves destroying a group with work in flight undefined)");
  // Waited for first, then destroyed, then a new group of the same name.
  EXPECT_EQ(error_of(head + "  - {op: all_reduce, tensor: t, group: g, handle: h}\n  - {op: wait, handle: h}\n"
                            "  - {op: destroy_group, group: g}\n  - {op: new_group, name: g, members: [1, 0]}\n"
                            "  - {op: all_reduce, tensor: t, group: g}\n"),
            "loaded");
}

TEST(LoaderErrors, UnknownDTypeAndReduceOpNotDefinedForIt) {
  EXPECT_EQ(error_of(std::string(kHead) + "tensors: {t: {dtype: float23}}\nprogram: []\n"),
            "t.yaml:4:22: error: unknown dtype 'float23' (did you mean 'float32'?)");
  EXPECT_EQ(error_of(std::string(kHead) + "tensors: {t: {dtype: float32}}\nprogram:\n  - {op: all_reduce, tensor: t, reduce_op: BAND}\n"),
            "t.yaml:6:5: error: BAND is not defined for float32 (bitwise ops need an integer or bool dtype)");
}

TEST(LoaderErrors, BadExpressionPointsAtTheCharacter) {
  EXPECT_EQ(error_of(std::string(kHead) + "tensors: {t: {dtype: float32, init: \"rank + * 2\"}}\nprogram: []\n"),
            "t.yaml:4:45: error: in expression 'rank + * 2': unexpected '*'");
  EXPECT_EQ(error_of(std::string(kHead) + "tensors: {t: {dtype: float32, init: \"rnk\"}}\nprogram: []\n"),
            "t.yaml:4:38: error: in expression 'rnk': unknown variable 'rnk' (here: rank, world, i, j)");
}

TEST(LoaderErrors, BlockingSendToItself) {
  EXPECT_EQ(error_of(std::string(kHead) + "tensors: {t: {dtype: float32}}\nprogram:\n  - {op: send, tensor: t, dst: rank}\n"),
            "t.yaml:6:5: error: blocking send to itself on rank 0 can never complete; use isend and irecv");
}

TEST(LoaderErrors, PollMsOnlyOnAnAsyncOpsHandle) {
  const std::string t = std::string(kHead) + "tensors: {t: {dtype: float32}}\nprogram:\n";
  EXPECT_EQ(error_of(t + "  - {op: all_reduce, tensor: t, poll_ms: 5}\n"),
            "t.yaml:6:42: error: poll_ms polls an async op's handle before its wait: give the step a handle");
  EXPECT_EQ(error_of(t + "  - {op: send, tensor: t, dst: 1, poll_ms: 5}\n"),
            "t.yaml:6:35: error: unknown key 'poll_ms' in a 'send' step (expected one of: op, ranks, if, tensor, dst, tag, "
            "group, timeout_us)");
  EXPECT_EQ(error_of(t + "  - {op: irecv, tensor: t, src: 1, handle: h, poll_ms: 0}\n  - {op: wait, handle: h}\n"),
            "t.yaml:6:56: error: poll_ms must be > 0");
  const Scenario s = load_text(t + "  - {op: isend, tensor: t, dst: 1, handle: h, poll_ms: 2.5}\n  - {op: wait, handle: h}\n",
                               "t.yaml");
  EXPECT_EQ(s.program.at(0).poll_ns, 2'500'000);
}

TEST(LoaderErrors, AllUnspecifiedAndOnlyTheOutcomeUnspecifiedAreOneChoice) {
  EXPECT_EQ(error_of(std::string(kHead) + "unspecified: a\nunspecified_outcome: b\nprogram: []\n"),
            "t.yaml:5:22: error: a scenario has 'unspecified' (all it checks) or 'unspecified_outcome' (only how it "
            "ends), not both");
  EXPECT_EQ(load_text(std::string(kHead) + "unspecified_outcome: b\nprogram: []\n", "t.yaml").unspecified_outcome, "b");
}

TEST(LoaderErrors, VersionAndReservedFaults) {
  EXPECT_EQ(error_of("version: 2\nname: x\nworld: 1\nprogram: []\n"),
            "t.yaml:1:10: error: unsupported format version 2; this collie reads version 1");
  EXPECT_EQ(error_of(std::string(kHead) + "faults: {drop: 1}\nprogram: []\n"),
            "t.yaml:4:9: error: faults must be a list of {fault: KIND, ...} mappings, not a mapping");
  EXPECT_EQ(error_of(std::string(kHead) + "faults:\n  - {fault: drop, srcc: 1}\nprogram: []\n"),
            "t.yaml:5:5: error: fault 'drop:srcc=1': unknown key 'srcc'");
  EXPECT_EQ(error_of(std::string(kHead) + "faults:\n  - {fault: crash, rank: 5}\nprogram: []\n"),
            "t.yaml:1:1: error: fault: crash rank 5 is out of range for world 2");
}

TEST(LoaderErrors, EmptyFileAndNotAMapping) {
  EXPECT_EQ(error_of(""), "t.yaml:1:1: error: the file is empty; a scenario starts with 'version: 1'");
  EXPECT_EQ(error_of("- 1\n- 2\n"), "t.yaml:1:1: error: a scenario must be a mapping of keys to values, not a list");
}

TEST(Loader, AValidScenarioLoadsAndAWorldOverrideThatBreaksItIsRejected) {
  Scenario s = load_text(std::string(kHead) + "tensors: {t: {dtype: float32}}\nprogram:\n  - {op: broadcast, tensor: t, src: 1}\n",
                         "t.yaml");
  EXPECT_EQ(s.world, 2);
  EXPECT_EQ(s.program.size(), 1u);
  try {
    load_text(std::string(kHead) + "tensors: {t: {dtype: float32}}\nprogram:\n  - {op: broadcast, tensor: t, src: 1}\n",
              "t.yaml", LoadOverrides{1});
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()), "t.yaml:6:5: error: root 1 is 1 on rank 0, out of range for world 1");
  }
}

TEST(Expr, PythonSemantics) {
  const std::vector<std::string> vars = {"rank", "world"};
  // As Python's repr shows the result: an int or a float.
  auto ev = [&](const std::string& t, int rank = 3, int world = 4) {
    return Expr::parse(t, Location{"x", 1, 1}, vars).eval({{"rank", rank}, {"world", world}}).str();
  };
  EXPECT_EQ(ev("(rank - 4) % world"), "3");  // floored, like Python
  EXPECT_EQ(ev("-7 // 2"), "-4");
  EXPECT_EQ(ev("-7.0 // 2"), "-4.0");
  EXPECT_EQ(ev("-7 % 2.5"), "0.5");
  EXPECT_EQ(ev("2 ** 10"), "1024");
  EXPECT_EQ(ev("2 ** -1"), "0.5");
  EXPECT_EQ(ev("rank / 3"), "1.0");  // true division: a float
  EXPECT_EQ(ev("rank == 3 and not world < 4"), "1");
  EXPECT_EQ(ev("0 or 5"), "5");  // and/or give an operand
  EXPECT_EQ(ev("1 if rank == 0 else 2 if rank == 3 else 5"), "2");
  EXPECT_EQ(ev("max(rank, 10) + min(1, 2) + abs(-2)"), "13");
  EXPECT_EQ(ev("min(1, 1.0)"), "1");  // the first of equals, as Python's min
  EXPECT_EQ(ev("5e-324"), "5e-324");  // a subnormal literal was refused as a bad number
  EXPECT_EQ(ev("0x10 + 0o10 + 0b10 + 1_000"), "1026");
}

// i // 0 and i % 0 gave 0, i / 0 gave inf; Python refuses them.
TEST(Expr, DivisionByZeroIsALocatedErrorAsInPython) {
  for (const char* text : {"rank // (world - 4)", "rank % 0", "rank / (rank - 3)", "0 ** -1"}) {
    const Expr e = Expr::parse(text, Location{"f.yaml", 7, 12}, {"rank", "world"});
    try {
      (void)e.eval({{"rank", 3}, {"world", 4}});
      ADD_FAILURE() << text << " evaluated";
    } catch (const ScenarioError& err) {
      EXPECT_EQ(std::string(err.what()).rfind("f.yaml:7:12: error: in expression '" + std::string(text) + "': ", 0), 0u)
          << err.what();
      EXPECT_NE(std::string(err.what()).find("rank=3, world=4"), std::string::npos) << err.what();
    }
  }
}

// 5000 nested parentheses or 100000 unary minuses overflowed the stack of
// collie validate (SIGSEGV).
TEST(Expr, DeeplyNestedExpressionsAreRefusedWithALocationNotAStackOverflow) {
  const std::vector<std::string> deep = {std::string(5000, '(') + "1" + std::string(5000, ')'), std::string(100000, '-') + "1",
                                         std::string(100000, '!') + "1"};
  for (std::size_t k = 0; k < 3; ++k) {
    try {
      Expr::parse(deep[k], Location{"d.yaml", 3, 9}, {});
      ADD_FAILURE() << "case " << k << " parsed";
    } catch (const ScenarioError& e) {
      EXPECT_NE(std::string(e.what()).find("nests deeper than 200 levels"), std::string::npos) << e.what();
      EXPECT_LT(std::string(e.what()).size(), 300u);  // the expression is quoted, not copied whole
    }
  }
  std::string pow = "2";
  for (int i = 0; i < 100000; ++i) pow += "**2";  // right-leaning: recursion while parsing
  EXPECT_THROW(Expr::parse(pow, Location{"d.yaml", 3, 9}, {}), ScenarioError);
  std::string chain = "1";
  for (int i = 0; i < 50000; ++i) chain += " + 1";  // a left-leaning tree as deep as it is long
  EXPECT_THROW(Expr::parse(chain, Location{"d.yaml", 3, 9}, {}), ScenarioError);
  std::string fine = "1";
  for (int i = 0; i < 150; ++i) fine = "(" + fine + " + 1)";
  EXPECT_EQ(Expr::parse(fine, Location{"d.yaml", 3, 9}, {}).eval({}).str(), "151");
}

// 2 ** 100 into int64 gave 0, -1 into uint8 gave 255: values a dtype cannot
// hold are errors at the expression or the literal, as torch refuses them.
TEST(Values, ThatDoNotFitTheDtypeAreLocatedErrors) {
  auto load_error = [](const std::string& text) -> std::string {
    try {
      load_text(text, "v.yaml");
    } catch (const ScenarioError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(load_error(std::string(kHead) + "tensors: {t: {dtype: int8, shape: [2], values: [1, 300]}}\nprogram:\n  - {op: barrier}\n"),
            "v.yaml:4:52: error: values of tensor 't': 300 does not fit int8 (-128 to 127)");
  EXPECT_EQ(load_error(std::string(kHead) +
                       "tensors: {t: {dtype: uint8}}\nprogram:\n  - {op: expect, tensor: t, equals: [-1]}\n"),
            "v.yaml:6:38: error: equals of tensor 't': -1 does not fit uint8 (0 to 255)");
  EXPECT_EQ(value_unfit(DType::kInt64, Value::real(9.3e18)).value_or(""), "9.3e+18 does not fit int64 (-2**63 to 2**63 - 1)");
  EXPECT_FALSE(value_unfit(DType::kInt8, Value::real(-128.9)));  // truncated toward zero, as torch converts
  EXPECT_FALSE(value_unfit(DType::kFloat16, Value::real(1e10)));  // floating dtypes overflow to inf
  EXPECT_TRUE(value_unfit(DType::kInt32, Value::real(std::nan(""))));
  const Scenario s = load_text(std::string(kHead) +
                                   "tensors: {t: {dtype: int64, shape: [2], init: \"2 ** (60 + 40 * i)\"}}\nprogram:\n"
                                   "  - {op: barrier}\n",
                               "v.yaml");
  try {
    run_scenario(s, {});
    ADD_FAILURE() << "ran";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("v.yaml:4:48: error: in expression '2 ** (60 + 40 * i)': "
                                          "1267650600228229401496703205376 does not fit int64", 0),
              0u)
        << e.what();
  }
}

}  // namespace
}  // namespace collie::scenario

namespace collie::scenario {
namespace {

// {nosuch} and an unclosed {t passed validate and printed literally; an index
// out of range was caught only at run time.
TEST(Print, PlaceholdersThatNameNothingAreRefusedBeforeAnythingRuns) {
  auto error_for = [](const std::string& text) -> std::string {
    try {
      load_text(std::string(kHead) + "tensors: {t: {dtype: float32, shape: [3]}, l: {dtype: float32, list: world}}\n"
                                     "program:\n  - {op: print, text: \"" + text + "\"}\n",
                "p.yaml");
    } catch (const ScenarioError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_for("ok {rank} {world} {t} {t[2]} {t[0]!r} {l} {l[1]} {{}}"), "");
  EXPECT_EQ(error_for("hi {nosuch}"), "p.yaml:6:27: error: print: {nosuch} names nothing (fields: rank, world, a tensor "
                                      "or list, HANDLE.source) (expected one of: rank, world, t, l)");
  EXPECT_EQ(error_for("hi {t"), "p.yaml:6:27: error: print: '{' is never closed (write '{{' for a brace)");
  EXPECT_EQ(error_for("x {t[3]}"), "p.yaml:6:26: error: print: {t[3]}: tensor 't' has 3 elements");
  EXPECT_EQ(error_for("x {l[2]}"), "p.yaml:6:26: error: print: {l[2]}: list 'l' has 2 tensors on rank 0");
  EXPECT_EQ(error_for("a } b"), "p.yaml:6:26: error: print: a single '}' (write '}}' for a brace)");
  EXPECT_EQ(error_for("{h.source}"), "p.yaml:6:24: error: print: {h.source} names no handle of an earlier step");
}

TEST(LoaderErrors, ReduceScatterAndAllToAllArgumentsFollowTorchsRules) {
  const std::string t = std::string(kHead) +
                        "tensors:\n"
                        "  l: {dtype: float32, shape: [2], list: 3}\n"
                        "  o: {dtype: float32, shape: [2]}\n"
                        "  big: {dtype: float32, shape: [5]}\n"
                        "  ints: {dtype: int32, shape: [4]}\n"
                        "program:\n";
  EXPECT_EQ(error_of(t + "  - {op: reduce_scatter, output: o, list: l}\n"),
            "t.yaml:10:5: error: list 'l' has 3 tensors but world has 2 ranks");
  EXPECT_EQ(error_of(t + "  - {op: reduce_scatter, list: l}\n"),
            "t.yaml:10:5: error: a 'reduce_scatter' step needs the key 'output'");
  EXPECT_EQ(error_of(t + "  - {op: reduce_scatter_tensor, output: o, tensor: big}\n"),
            "t.yaml:10:5: error: tensor 'big' has 5 elements but world has 2 ranks of 2 (give it shape [4], or an "
            "expression of world)");
  EXPECT_EQ(error_of(t + "  - {op: reduce_scatter_tensor, output: o, tensor: ints}\n"),
            "t.yaml:10:5: error: output 'o' is float32 but tensor 'ints' is int32");
  EXPECT_EQ(error_of(t + "  - {op: all_to_all, output: o, list: l}\n"),
            "t.yaml:10:5: error: output 'o' must be a list tensor (give it 'list: N')");
  EXPECT_EQ(error_of(t + "  - {op: all_to_all_single, output: big, tensor: big}\n"),
            "t.yaml:10:5: error: tensor 'big' has 5 rows in dim 0, which world's 2 ranks do not divide; give "
            "input_split_sizes");
  EXPECT_EQ(error_of(t + "  - {op: all_to_all_single, output: big, tensor: big, input_split_sizes: [1, 4], "
                         "output_split_sizes: [2, 2]}\n"),
            "t.yaml:10:102: error: output_split_sizes sum to 4 on rank 0 but tensor 'big' has 5 rows in dim 0");
  EXPECT_EQ(error_of(t + "  - {op: all_to_all_single, output: big, tensor: big, input_split_sizes: [5]}\n"),
            "t.yaml:10:74: error: input_split_sizes lists 1 sizes but world has 2 ranks");
  EXPECT_EQ(error_of(t + "  - {op: all_to_all_single, output: big, tensor: big, input_split_sizes: \"rank - j\", "
                         "output_split_sizes: [1, 4]}\n"),
            "t.yaml:10:74: error: input_split_sizes[1] is -1 on rank 0; sizes are whole numbers of rows, at least 0");
  EXPECT_EQ(error_of(t + "  - {op: reduce_scatter, output: o, list: l, reduce_op: BAND}\n").find("loaded"),
            std::string::npos);
}

}  // namespace
}  // namespace collie::scenario
