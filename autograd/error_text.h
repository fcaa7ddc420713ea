#pragma once
// Pieces of error messages that keep a message's first line short however large the input: the
// first line names the op or file and what is wrong; anything long (a list of shapes, a quoted
// user value, a file header) is cut here and, when the whole of it helps, goes on later lines.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tg {

/// `text` if it has at most `max` characters, else its first `max` characters followed by
/// "... (N more characters)". For values quoted in messages (a name, a JSON value, a header).
std::string elide(std::string_view text, std::size_t max = 48);

/// A number as the messages print it: std::ostream's default format (6 significant digits:
/// 0.001, 1e-08, 123457, inf, nan).
std::string number_text(double v);

/// The items joined by ", ", the first `first` of them, then "... (N more)" if there are more.
std::string join_elided(const std::vector<std::string>& items, std::size_t first = 6);

}  // namespace tg
