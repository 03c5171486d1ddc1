// One test per class of bad input: each names file, line and column and
// says what was expected.
#include "scenario/loader.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(error_of(std::string(kHead) + "progam: []\n"),
            "t.yaml:4:1: error: unknown key 'progam' in the scenario (did you mean 'program'?)");
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

TEST(Loader, AValidScenarioLoadsAndCheckWorldRejectsAWorldThatBreaksIt) {
  Scenario s = load_text(std::string(kHead) + "tensors: {t: {dtype: float32}}\nprogram:\n  - {op: broadcast, tensor: t, src: 1}\n",
                         "t.yaml");
  EXPECT_EQ(s.world, 2);
  EXPECT_EQ(s.program.size(), 1u);
  s.world = 1;
  try {
    check_world(s);
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()), "t.yaml:6:5: error: root 1 is 1 on rank 0, out of range for world 1");
  }
}

TEST(Expr, PythonSemantics) {
  const std::vector<std::string> vars = {"rank", "world"};
  auto ev = [&](const std::string& t, double rank = 3, double world = 4) {
    return Expr::parse(t, Location{"x", 1, 1}, vars).eval({{"rank", rank}, {"world", world}});
  };
  EXPECT_EQ(ev("(rank - 4) % world"), 3);  // floored, like Python
  EXPECT_EQ(ev("-7 // 2"), -4);
  EXPECT_EQ(ev("2 ** 10"), 1024);
  EXPECT_EQ(ev("rank == 3 and not world < 4"), 1);
  EXPECT_EQ(ev("1 if rank == 0 else 2 if rank == 3 else 5"), 2);
  EXPECT_EQ(ev("max(rank, 10) + min(1, 2) + abs(-2)"), 13);
}

}  // namespace
}  // namespace collie::scenario
