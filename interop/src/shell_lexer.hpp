#pragma once
// Shell text → statements of words: the lexing half of the launch-script reader (shell_words.cpp interprets the
// words). A small subset of bash, enough for Megatron launch scripts, never executing anything.

#include <cctype>
#include <string>
#include <vector>

namespace hcpsim::shell {

/// One piece of a shell word: literal text, or an expansion (`$NAME`, `${...}`, `$((...))`, `$(...)`).
struct Segment {
  std::string text;        ///< literal text, or the expansion as written (with its `$`)
  bool expansion = false;
  bool quoted = false;     ///< inside double quotes: no word splitting
};

/// Where a quoted word moves to another source line: the text of segments[segment] from `offset` on was written on
/// `line` (a newline kept inside quotes, or a backslash-newline removed inside double quotes, came before it).
struct LineMark {
  size_t segment = 0;
  size_t offset = 0;
  int line = 0;
};
/// One shell word before expansion, with where it starts.
struct Word {
  std::vector<Segment> segments;
  int line = 0;
  int column = 0;  ///< 1-based column of the word's first character
  std::vector<LineMark> line_marks;  ///< in text order; empty for a word on one line
  std::string array_name;        ///< non-empty for `NAME=( ... )`
  std::vector<Word> array_words; ///< the elements of an array assignment
};

/// One simple command: the words between separators (newline, `;`, `&&`, `||`, `|`, `&`).
struct Statement {
  std::vector<Word> words;
  int line = 0;  ///< 1-based line of the first word
  /// Lines that end in a backslash followed by blanks ("\  " then a newline): read as continuations, as the script
  /// intends, though bash ends the command there (the backslash escapes the blank).
  std::vector<int> blank_continuations;
};

inline bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
inline bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }

/// Splits shell text into statements of words; quotes, comments, continuations, redirections and arrays are
/// resolved here, expansions are kept as segments for the interpreter. Never throws: unterminated quotes end at
/// the end of the text. Empty statements are dropped.
std::vector<Statement> lex_shell(const std::string& text);

}  // namespace hcpsim::shell
