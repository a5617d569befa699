// What a TOML syntax error most likely is, in the words of the person who made it. The parser
// (toml++) says where it could not go on, which for an unclosed array or inline table is lines
// after the mistake, and in its own terms ("could not determine value type"). A light scan of
// the text up to that point finds the few mistakes that make up most syntax errors in a
// topology file: an array or inline table never closed, a string whose closing quote is
// missing, a bare word where a string was meant.
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "internal.h"

namespace hoprelay::config::internal {
namespace {

struct Open {
  char bracket;  // '[' (an array value) or '{' (an inline table)
  uint32_t line;
  uint32_t col;
};

std::string at(uint32_t line, uint32_t col) {
  return std::to_string(line) + ":" + std::to_string(col);
}

// The arrays and inline tables still open at `end` (offset into text), outermost first.
// Comments and strings are skipped; a '[' that starts a line outside any value is a table
// header, not an array.
std::vector<Open> open_values(std::string_view text, size_t end) {
  std::vector<Open> open;
  uint32_t line = 1, col = 1;
  bool line_start = true;  // only blanks before, on this line
  size_t i = 0;
  auto advance = [&](size_t n) {
    for (size_t k = 0; k < n && i < text.size(); ++k, ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
        line_start = true;
      } else {
        ++col;
      }
    }
  };
  while (i < end && i < text.size()) {
    const char c = text[i];
    if (c == '#') {
      while (i < end && i < text.size() && text[i] != '\n') advance(1);
      continue;
    }
    if (c == '"' || c == '\'') {
      const bool multi = text.substr(i, 3) == std::string(3, c);
      const std::string_view close =
          multi ? std::string_view(c == '"' ? "\"\"\"" : "'''") : std::string_view(&text[i], 1);
      advance(multi ? 3 : 1);
      line_start = false;
      while (i < end && i < text.size()) {
        if (c == '"' && text[i] == '\\') {
          advance(2);
        } else if (text.substr(i, close.size()) == close) {
          advance(close.size());
          break;
        } else if (!multi && text[i] == '\n') {
          break;  // an unclosed single-line string: the parser stops here anyway
        } else {
          advance(1);
        }
      }
      continue;
    }
    if (c == '[' && line_start && open.empty()) {  // a table header: to the end of its line
      while (i < end && i < text.size() && text[i] != '\n') advance(1);
      continue;
    }
    if (c == '[' || c == '{') {
      open.push_back({c, line, col});
    } else if ((c == ']' || c == '}') && !open.empty()) {
      open.pop_back();
    }
    if (!std::isspace(static_cast<unsigned char>(c))) line_start = false;
    advance(1);
  }
  return open;
}

size_t offset_of(std::string_view text, uint32_t line, uint32_t col) {
  size_t i = 0;
  for (uint32_t l = 1; l < line && i < text.size(); ++i) {
    if (text[i] == '\n') ++l;
  }
  return std::min(text.size(), i + (col > 0 ? col - 1 : 0));
}

// "[nodes.b]" or "[[x]]": brackets that match around a dotted name that starts with a letter
// (not "[3]]", a nested array).
bool is_table_header(std::string_view line) {
  const size_t depth = line.starts_with("[[") ? 2 : line.starts_with("[") ? 1 : 0;
  if (depth == 0 || line.size() <= 2 * depth) return false;
  if (line.substr(line.size() - depth) != std::string_view("]]").substr(0, depth)) return false;
  const std::string_view name = line.substr(depth, line.size() - 2 * depth);
  if (!std::isalpha(static_cast<unsigned char>(name.front())) && name.front() != '_') return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

// The bare word (letters, digits, - _ .) at `offset`, or "".
std::string_view word_at(std::string_view text, size_t offset) {
  size_t end = offset;
  while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                               text[end] == '-' || text[end] == '_' || text[end] == '.')) {
    ++end;
  }
  return text.substr(offset, end - offset);
}

}  // namespace

std::string syntax_hint(std::string_view text, uint32_t line, uint32_t col,
                        std::string_view description) {
  const size_t offset = offset_of(text, line, col);
  const std::vector<Open> open = open_values(text, offset);
  // What the parser stopped at: a key (a word, then '='), a table header, or a value.
  const std::string_view word = word_at(text, offset);
  size_t after = offset + word.size();
  while (after < text.size() && (text[after] == ' ' || text[after] == '\t')) ++after;
  const bool key = !word.empty() && after < text.size() && text[after] == '=';
  // The error's line is a table header ("[nodes.b]", "[[x]]"), wherever on it the parser
  // stopped (inside an open array it reads one as a nested array, and fails on "nodes").
  const size_t line_start = offset - std::min<size_t>(offset, col > 0 ? col - 1 : 0);
  const size_t line_end = std::min(text.find('\n', line_start), text.size());
  std::string_view this_line = text.substr(line_start, line_end - line_start);
  while (!this_line.empty() && std::isspace(static_cast<unsigned char>(this_line.back()))) {
    this_line.remove_suffix(1);
  }
  while (!this_line.empty() && std::isspace(static_cast<unsigned char>(this_line.front()))) {
    this_line.remove_prefix(1);
  }
  const bool header = is_table_header(this_line);
  // An array or inline table opened on an earlier line and never closed: the parser went on
  // into the next lines and stopped at the next key or table, which cannot be in it.
  // (The innermost one opened before this line: a header inside an open array is read as a
  // nested array, opened on this line.)
  auto before =
      std::find_if(open.rbegin(), open.rend(), [&](const Open& o) { return o.line < line; });
  if (before != open.rend() && (key || header)) {
    const Open& o = *before;
    return o.bracket == '['
               ? " (the array opened at " + at(o.line, o.col) +
                     " is still open here: a ']' missing?)"
               : " (the inline table opened at " + at(o.line, o.col) +
                     " is still open here: a '}' missing? An inline table is on one line)";
  }
  const bool at_line_end = offset >= text.size() || text[offset] == '\n' || text[offset] == '\r';
  if (description.find("control characters") != std::string_view::npos && at_line_end) {
    return " (a string that does not end on its line: its closing quote missing?)";
  }
  if (!open.empty() && open.back().bracket == '{' && at_line_end) {
    return " (the inline table opened at " + at(open.back().line, open.back().col) +
           " ends on its line: a '}' missing?)";
  }
  if (description.find("could not determine value type") != std::string_view::npos &&
      !word.empty() && std::isalpha(static_cast<unsigned char>(word[0]))) {
    return " (strings are quoted in TOML: \"" + std::string(word) + "\")";
  }
  if (description.find("expected comma") != std::string_view::npos && !open.empty()) {
    return " (a comma missing between two values?)";
  }
  return "";
}

}  // namespace hoprelay::config::internal
