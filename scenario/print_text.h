// The text of a print step: literal text and {fields}, as Python's
// str.format writes them -- {rank}, {world}, {T} (a tensor), {T[k]} (an
// element, as .item() prints it), {T[k]!r} (as torch's repr of t[k]), {L} (a
// list), {L[k]} (an entry), {H.source} (who an any-source receive matched);
// {{ and }} are braces. Parsed once by the loader, which checks every field
// names something and every index is in range, before anything runs.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace collie::scenario {

struct PrintPart {
  bool is_field = false;
  std::string text;                  // literal text, or the field's name
  std::optional<std::size_t> index;  // [k]
  bool repr = false;                 // !r
  bool source = false;               // NAME.source
  std::size_t offset = 0;            // where the field starts in the text
};

struct PrintTextError {
  std::size_t offset = 0;  // in the text
  std::string message;
};

// The parts of `text`, or why it is malformed (an unclosed '{', a single
// '}', a bad index).
std::vector<PrintPart> parse_print_text(const std::string& text, std::optional<PrintTextError>* error);

}  // namespace collie::scenario
