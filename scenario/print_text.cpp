#include "scenario/print_text.h"

#include <cctype>

namespace collie::scenario {

std::vector<PrintPart> parse_print_text(const std::string& t, std::optional<PrintTextError>* error) {
  std::vector<PrintPart> parts;
  std::string literal;
  auto flush = [&] {
    if (literal.empty()) return;
    parts.push_back(PrintPart{false, literal, std::nullopt, false, false, 0});
    literal.clear();
  };
  auto fail = [&](std::size_t at, std::string m) {
    *error = PrintTextError{at, std::move(m)};
    return std::vector<PrintPart>{};
  };
  for (std::size_t p = 0; p < t.size(); ++p) {
    if (t[p] == '{' && p + 1 < t.size() && t[p + 1] == '{') {
      literal += '{';
      ++p;
      continue;
    }
    if (t[p] == '}') {
      if (p + 1 < t.size() && t[p + 1] == '}') {
        literal += '}';
        ++p;
        continue;
      }
      return fail(p, "a single '}' (write '}}' for a brace)");
    }
    if (t[p] != '{') {
      literal += t[p];
      continue;
    }
    const std::size_t end = t.find('}', p);
    if (end == std::string::npos) return fail(p, "'{' is never closed (write '{{' for a brace)");
    std::string field = t.substr(p + 1, end - p - 1);
    PrintPart f{true, "", std::nullopt, false, false, p};
    if (field.size() > 2 && field.compare(field.size() - 2, 2, "!r") == 0) {
      f.repr = true;
      field.resize(field.size() - 2);
    }
    if (const auto b = field.find('['); b != std::string::npos) {
      if (field.back() != ']') return fail(p, "'{" + field + "}': an index is written [k]");
      const std::string k = field.substr(b + 1, field.size() - b - 2);
      if (k.empty() || k.size() > 12 || k.find_first_not_of("0123456789") != std::string::npos)
        return fail(p, "'{" + field + "}': the index must be a whole number");
      f.index = static_cast<std::size_t>(std::stoull(k));
      field.resize(b);
    }
    if (field.size() > 7 && field.compare(field.size() - 7, 7, ".source") == 0) {
      f.source = true;
      field.resize(field.size() - 7);
    }
    if (field.empty()) return fail(p, "'{}' names nothing (positional fields are not supported)");
    f.text = field;
    flush();
    parts.push_back(std::move(f));
    p = end;
  }
  flush();
  return parts;
}

}  // namespace collie::scenario
