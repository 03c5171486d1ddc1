// Text that reaches a report: scenario names, print steps, a library's
// error messages. Whatever bytes a file or a library holds, what collie
// writes is valid UTF-8 (JSON and XML require it).
#pragma once

#include <string>
#include <string_view>

namespace collie {

// `s` with every byte sequence that is not valid UTF-8 replaced by U+FFFD.
std::string valid_utf8(std::string_view s);

// `s` as one word of a POSIX shell command: as it is when every byte is one
// a shell leaves alone (letters, digits, _ @ % + = : , . / -), else in
// single quotes (a ' inside as '\''); '' for the empty string. Replay lines
// are built from these, so that pasting one runs exactly what it says.
std::string shell_quote(std::string_view s);

}  // namespace collie
