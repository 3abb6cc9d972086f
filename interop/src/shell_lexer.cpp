#include "shell_lexer.hpp"

#include <algorithm>

namespace hcpsim::shell {
namespace {

/// Splits shell text into statements of words; quotes, comments, continuations and arrays are resolved here,
/// expansions are kept as segments for the interpreter.
class ShellLexer {
 public:
  explicit ShellLexer(const std::string& text) : t_(text) {}

  std::vector<Statement> run() {
    std::vector<Statement> out;
    while (i_ < t_.size()) {
      Statement st = statement();
      if (!st.words.empty()) out.push_back(std::move(st));
    }
    return out;
  }

 private:
  char peek(size_t k = 0) const { return i_ + k < t_.size() ? t_[i_ + k] : '\0'; }

  void skip_blanks(bool in_array) {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++i_;
      } else if (c == '\\' && peek(1) == '\n') {
        i_ += 2;
        ++line_;
      } else if (c == '\\' && continuation_after_blanks()) {
        // "\   \n": a backslash followed by stray blanks; bash would not continue, but the intent is plain. The
        // statement records the line, so the importer can say that the real run never saw what follows.
        blank_continuations_.push_back(line_);
        while (t_[i_] != '\n') ++i_;
        ++i_;
        ++line_;
      } else if (in_array && c == '\n') {
        ++i_;
        ++line_;
      } else if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  bool continuation_after_blanks() const {
    size_t k = i_ + 1;
    while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t' || t_[k] == '\r')) ++k;
    return k > i_ + 1 && (k == t_.size() || t_[k] == '\n');
  }

  Statement statement() {
    Statement st;
    st.line = line_;
    blank_continuations_.clear();
    while (true) {
      skip_blanks(false);
      if (i_ >= t_.size()) break;
      const char c = t_[i_];
      if (c == '\n') {
        ++i_;
        ++line_;
        break;
      }
      if (c == ';' || c == '&' || c == '|') {  // separators: ;, &&, ||, |, & end the command
        while (i_ < t_.size() && (t_[i_] == ';' || t_[i_] == '&' || t_[i_] == '|')) ++i_;
        break;
      }
      if (c == '>' || c == '<' || (std::isdigit(static_cast<unsigned char>(c)) && (peek(1) == '>' || peek(1) == '<'))) {
        redirection();
        continue;
      }
      if (st.words.empty()) st.line = line_;
      st.words.push_back(word(false));
    }
    st.blank_continuations = blank_continuations_;
    return st;
  }

  /// Skips `> file`, `2>&1`, `>> log`, `< in`.
  void redirection() {
    while (i_ < t_.size() && (std::isdigit(static_cast<unsigned char>(t_[i_])) || t_[i_] == '>' || t_[i_] == '<' ||
                              t_[i_] == '&'))
      ++i_;
    skip_blanks(false);
    if (i_ < t_.size() && t_[i_] != '\n' && t_[i_] != ';' && t_[i_] != '|') (void)word(false);
  }

  static bool ends_word(char c, bool in_array) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';' || c == '|' || c == '&' ||
           (in_array && c == ')');
  }

  void append_literal(Word& w, char c, bool quoted) {
    if (w.segments.empty() || w.segments.back().expansion || w.segments.back().quoted != quoted)
      w.segments.push_back({"", false, quoted});
    w.segments.back().text += c;
  }

  Word word(bool in_array) {
    Word w;
    w.line = line_;
    w.column = column();
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '\\' && peek(1) == '\n') {  // continuation inside a word joins it with the next line
        i_ += 2;
        ++line_;
        break;
      }
      if (ends_word(c, in_array)) break;
      if (c == '(' && !in_array && is_array_start(w)) {
        array_elements(w);
        return w;
      }
      if (c == '\'') {
        single_quoted(w);
      } else if (c == '"') {
        double_quoted(w);
      } else if (c == '$' && starts_expansion(peek(1))) {
        w.segments.push_back({expansion(), true, false});
      } else if (c == '`') {
        backquoted(w);
      } else if (c == '\\' && i_ + 1 < t_.size()) {
        append_literal(w, t_[i_ + 1], false);
        i_ += 2;
      } else {
        append_literal(w, c, false);
        ++i_;
      }
    }
    return w;
  }

  /// True when `$` followed by `c` starts an expansion (otherwise the `$` is literal).
  static bool starts_expansion(char c) {
    return is_name_start(c) || c == '{' || c == '(' || std::isdigit(static_cast<unsigned char>(c)) || c == '@' ||
           c == '*';
  }

  /// Reads `( a b c )` after `NAME=` into the word's array elements (newlines and comments allowed inside).
  void array_elements(Word& w) {
    ++i_;
    w.array_name = w.segments.front().text.substr(0, w.segments.front().text.size() - 1);
    while (true) {
      skip_blanks(true);
      if (i_ >= t_.size()) break;
      if (t_[i_] == ')') {
        ++i_;
        break;
      }
      // `;`, `|` or `&` inside the parentheses (a syntax error in bash) ends a word without consuming anything:
      // the array ends there and the statement at the separator. Without this the loop added empty words forever.
      const size_t before = i_;
      Word element = word(true);
      if (i_ == before) break;
      w.array_words.push_back(std::move(element));
    }
  }

  /// After line_ moved inside quotes: what follows in `w` is on line_ (Word::line_marks). The next literal
  /// continues the last segment when it is a quoted literal, else it starts the next one.
  void mark_line(Word& w) const {
    const bool continues = !w.segments.empty() && !w.segments.back().expansion && w.segments.back().quoted;
    w.line_marks.push_back(continues ? LineMark{w.segments.size() - 1, w.segments.back().text.size(), line_}
                                     : LineMark{w.segments.size(), 0, line_});
  }

  /// Reads `'...'`: everything literal up to the closing quote.
  void single_quoted(Word& w) {
    ++i_;
    if (w.segments.empty()) w.segments.push_back({"", false, true});  // '' is an (empty) word
    while (i_ < t_.size() && t_[i_] != '\'') {
      const bool newline = t_[i_] == '\n';
      append_literal(w, t_[i_++], true);
      if (newline) {
        ++line_;
        mark_line(w);
      }
    }
    ++i_;
  }

  /// Reads `"..."`: `\"`, `\\`, `\$` escapes and continuations; expansions stay expansions (quoted: not split).
  void double_quoted(Word& w) {
    ++i_;
    if (w.segments.empty()) w.segments.push_back({"", false, true});
    while (i_ < t_.size() && t_[i_] != '"') {
      if (t_[i_] == '\\' && i_ + 1 < t_.size() && (t_[i_ + 1] == '"' || t_[i_ + 1] == '\\' || t_[i_ + 1] == '$')) {
        append_literal(w, t_[i_ + 1], true);
        i_ += 2;
      } else if (t_[i_] == '\\' && peek(1) == '\n') {
        i_ += 2;
        ++line_;
        mark_line(w);
      } else if (t_[i_] == '$') {
        w.segments.push_back({expansion(), true, true});
      } else {
        const bool newline = t_[i_] == '\n';
        append_literal(w, t_[i_++], true);
        if (newline) {
          ++line_;
          mark_line(w);
        }
      }
    }
    ++i_;
  }

  /// Reads a backquoted command substitution: kept whole, never run.
  void backquoted(Word& w) {
    std::string e = "`";
    ++i_;
    while (i_ < t_.size() && t_[i_] != '`') e += t_[i_++];
    ++i_;
    w.segments.push_back({e + "`", true, false});
  }

  /// True when the word so far is exactly `NAME=` (an array assignment follows).
  static bool is_array_start(const Word& w) {
    if (w.segments.size() != 1 || w.segments[0].expansion || w.segments[0].quoted) return false;
    const std::string& s = w.segments[0].text;
    if (s.size() < 2 || s.back() != '=' || !is_name_start(s[0])) return false;
    return std::all_of(s.begin(), s.end() - 1, is_name_char);
  }

  /// Reads one `$...` expansion and returns it as written.
  std::string expansion() {
    const size_t start = i_;
    ++i_;  // '$'
    if (peek() == '{') {
      int depth = 0;
      while (i_ < t_.size()) {
        if (t_[i_] == '{') ++depth;
        if (t_[i_] == '}' && --depth == 0) {
          ++i_;
          break;
        }
        ++i_;
      }
    } else if (peek() == '(') {
      int depth = 0;
      while (i_ < t_.size()) {
        if (t_[i_] == '(') ++depth;
        if (t_[i_] == ')' && --depth == 0) {
          ++i_;
          break;
        }
        if (t_[i_] == '\n') ++line_;
        ++i_;
      }
    } else if (std::isdigit(static_cast<unsigned char>(peek())) || peek() == '@' || peek() == '*') {
      ++i_;
    } else {
      while (i_ < t_.size() && is_name_char(t_[i_])) ++i_;
    }
    return t_.substr(start, i_ - start);
  }

  /// 1-based column of position i_ on its line.
  /// Scans only the text since the previous call (i_ never moves back), so a long line of many words costs time
  /// linear in its length, not quadratic.
  int column() {
    if (i_ < scanned_) {  // not expected; rescan from the start
      scanned_ = 0;
      line_start_ = 0;
    }
    for (; scanned_ < i_; ++scanned_)
      if (t_[scanned_] == '\n') line_start_ = scanned_ + 1;
    return static_cast<int>(i_ - line_start_) + 1;
  }

  const std::string& t_;
  size_t i_ = 0;
  int line_ = 1;
  std::vector<int> blank_continuations_;  ///< of the statement being read (Statement::blank_continuations)
  size_t scanned_ = 0;     ///< column(): text before this position has been scanned for newlines
  size_t line_start_ = 0;  ///< column(): start of the line holding scanned_
};

}  // namespace

std::vector<Statement> lex_shell(const std::string& text) {
  ShellLexer lexer(text);
  return lexer.run();
}

}  // namespace hcpsim::shell
