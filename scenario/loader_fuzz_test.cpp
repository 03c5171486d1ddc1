// Fuzzing the scenario loader (built with AddressSanitizer and
// UndefinedBehaviorSanitizer): mutants of every scenario in the tree must
// either load or be rejected with a ScenarioError -- never another
// exception, a crash, a hang or a sanitizer report. Small mutants that load
// are also run, which must not crash either.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "scenario/loader.h"
#include "scenario/runner.h"

namespace collie::scenario {
namespace {

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(COLLIE_SOURCE_DIR) + "/scenarios")) {
      if (e.path().extension() != ".yaml") continue;
      std::ifstream f(e.path());
      std::ostringstream os;
      os << f.rdbuf();
      out.push_back(os.str());
    }
    return out;
  }();
  return texts;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream is(s);
  std::string l;
  while (std::getline(is, l)) lines.push_back(l);
  return lines;
}

std::string join(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

std::string mutate(std::string text) {
  const int n = *rc::gen::inRange(1, 6);
  static const std::vector<std::string> pieces = {
      "{", "}", "[", "]", ":", ",", "-", "\"", "'", " ", "\n", "  ", "#", "&a", "*a", "!!int", "|", ">",
      "-1", "0", "99999999999999999999", "1e308", "nan", "op: send", "world: 0", "list: -3", "shape: [-1]",
      "rank", "i", "/ 0", "% 0", "**", "tensor: t", "group: g", "dst: rank + 1", "handle: h", "values: []"};
  static const std::vector<std::string> keys = {"version", "name", "world", "tensors", "program", "programs",
                                                "groups", "outcome", "op", "tensor", "dst", "src", "list",
                                                "shape", "dtype", "init", "members", "handle", "ranks", "if"};
  for (int k = 0; k < n; ++k) {
    if (text.empty()) text = "x";
    const std::size_t pos = *rc::gen::inRange<std::size_t>(0, text.size());
    switch (*rc::gen::inRange(0, 6)) {
      case 0:  // delete a range
        text.erase(pos, *rc::gen::inRange<std::size_t>(1, 40));
        break;
      case 1:  // insert a piece of YAML or expression syntax
        text.insert(pos, *rc::gen::elementOf(pieces));
        break;
      case 2: {  // duplicate or drop a line
        auto lines = split_lines(text);
        if (lines.empty()) break;
        const std::size_t l = *rc::gen::inRange<std::size_t>(0, lines.size());
        if (*rc::gen::arbitrary<bool>()) lines.insert(lines.begin() + static_cast<long>(l), lines[l]);
        else lines.erase(lines.begin() + static_cast<long>(l));
        text = join(lines);
        break;
      }
      case 3: {  // swap two lines
        auto lines = split_lines(text);
        if (lines.size() < 2) break;
        std::swap(lines[*rc::gen::inRange<std::size_t>(0, lines.size())],
                  lines[*rc::gen::inRange<std::size_t>(0, lines.size())]);
        text = join(lines);
        break;
      }
      case 4: {  // replace a key by another
        const std::string& from = *rc::gen::elementOf(keys);
        const auto at = text.find(from + ":");
        if (at != std::string::npos) text.replace(at, from.size(), *rc::gen::elementOf(keys));
        break;
      }
      default:  // a random byte
        text[pos] = static_cast<char>(*rc::gen::inRange(1, 128));
        break;
    }
  }
  return text;
}

RC_GTEST_PROP(LoaderFuzz, MutantsLoadOrAreRejectedWithALocation, ()) {
  const std::string text = mutate(*rc::gen::elementOf(corpus()));
  Scenario s;
  try {
    s = load_text(text, "fuzz.yaml");
  } catch (const ScenarioError& e) {
    RC_ASSERT(std::string(e.what()).rfind("fuzz.yaml:", 0) == 0);
    return;
  } catch (const std::exception& e) {
    RC_FAIL(std::string("a mutant raised something other than ScenarioError: ") + e.what() + "\n---\n" + text);
  }
  // It loaded: run it if it is small.
  std::size_t elements = 0;
  for (const auto& t : s.tensors) elements += t.count() * (t.list ? 64 : 1);
  if (s.world > 16 || elements > 200000) return;
  try {
    const ScenarioResult r = run_scenario(s, {});
    RC_ASSERT(!r.outcome.empty());
  } catch (const ScenarioError& e) {
    // What only a run can find (a division by zero at these values, a value
    // the dtype cannot hold) is located in the file too.
    RC_ASSERT(std::string(e.what()).rfind("fuzz.yaml:", 0) == 0);
  }
}

}  // namespace
}  // namespace collie::scenario
