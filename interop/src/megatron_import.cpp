#include "hcpsim/interop/megatron_import.hpp"

#include <yaml-cpp/yaml.h>

#include "hcpsim/config/megatron_defaults.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

namespace hcpsim {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Shell text → words. A small subset of bash: enough for Megatron launch scripts, never executing anything.
// ---------------------------------------------------------------------------------------------------------------

/// One piece of a shell word: literal text, or an expansion (`$NAME`, `${...}`, `$((...))`, `$(...)`).
struct Segment {
  std::string text;        ///< literal text, or the expansion as written (with its `$`)
  bool expansion = false;
  bool quoted = false;     ///< inside double quotes: no word splitting
};

struct Word {
  std::vector<Segment> segments;
  int line = 0;
  int column = 0;  ///< 1-based column of the word's first character
  std::string array_name;        ///< non-empty for `NAME=( ... )`
  std::vector<Word> array_words; ///< the elements of an array assignment
};

struct Statement {
  std::vector<Word> words;
  int line = 0;
};

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }

std::string display(const std::string& name) { return name == "-" ? "<stdin>" : name; }

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
        // "\   \n": a backslash followed by stray blanks; bash would not continue, but the intent is plain.
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
        ++i_;
        w.array_name = w.segments.front().text.substr(0, w.segments.front().text.size() - 1);
        while (true) {
          skip_blanks(true);
          if (i_ >= t_.size()) break;
          if (t_[i_] == ')') {
            ++i_;
            break;
          }
          w.array_words.push_back(word(true));
        }
        return w;
      }
      if (c == '\'') {
        ++i_;
        if (w.segments.empty()) w.segments.push_back({"", false, true});  // '' is an (empty) word
        while (i_ < t_.size() && t_[i_] != '\'') {
          if (t_[i_] == '\n') ++line_;
          append_literal(w, t_[i_++], true);
        }
        ++i_;
        continue;
      }
      if (c == '"') {
        ++i_;
        if (w.segments.empty()) w.segments.push_back({"", false, true});
        while (i_ < t_.size() && t_[i_] != '"') {
          if (t_[i_] == '\\' && i_ + 1 < t_.size() && (t_[i_ + 1] == '"' || t_[i_ + 1] == '\\' || t_[i_ + 1] == '$')) {
            append_literal(w, t_[i_ + 1], true);
            i_ += 2;
          } else if (t_[i_] == '\\' && peek(1) == '\n') {
            i_ += 2;
            ++line_;
          } else if (t_[i_] == '$') {
            w.segments.push_back({expansion(), true, true});
          } else {
            if (t_[i_] == '\n') ++line_;
            append_literal(w, t_[i_++], true);
          }
        }
        ++i_;
        continue;
      }
      if (c == '$' && i_ + 1 < t_.size() && (is_name_start(t_[i_ + 1]) || t_[i_ + 1] == '{' || t_[i_ + 1] == '(' ||
                                             std::isdigit(static_cast<unsigned char>(t_[i_ + 1])) ||
                                             t_[i_ + 1] == '@' || t_[i_ + 1] == '*')) {
        w.segments.push_back({expansion(), true, false});
        continue;
      }
      if (c == '`') {  // command substitution: kept whole, never run
        std::string e = "`";
        ++i_;
        while (i_ < t_.size() && t_[i_] != '`') e += t_[i_++];
        ++i_;
        w.segments.push_back({e + "`", true, false});
        continue;
      }
      if (c == '\\' && i_ + 1 < t_.size()) {
        append_literal(w, t_[i_ + 1], false);
        i_ += 2;
        continue;
      }
      append_literal(w, c, false);
      ++i_;
    }
    return w;
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
  int column() const {
    const size_t nl = i_ == 0 ? std::string::npos : t_.rfind('\n', i_ - 1);
    return static_cast<int>(i_ - (nl == std::string::npos ? 0 : nl + 1)) + 1;
  }

  const std::string& t_;
  size_t i_ = 0;
  int line_ = 1;
};

/// Integer arithmetic of `$(( ... ))`: + - * / % and parentheses over integers and variables.
class Arithmetic {
 public:
  Arithmetic(std::string text, const std::map<std::string, std::string>& vars) : s_(std::move(text)), vars_(vars) {}

  std::optional<int64_t> eval() {
    auto v = sum();
    blanks();
    if (!v || p_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void blanks() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
  }
  std::optional<int64_t> sum() {
    auto a = product();
    while (a) {
      blanks();
      if (p_ >= s_.size() || (s_[p_] != '+' && s_[p_] != '-')) break;
      const char op = s_[p_++];
      auto b = product();
      if (!b) return std::nullopt;
      a = op == '+' ? *a + *b : *a - *b;
    }
    return a;
  }
  std::optional<int64_t> product() {
    auto a = unary();
    while (a) {
      blanks();
      if (p_ >= s_.size() || (s_[p_] != '*' && s_[p_] != '/' && s_[p_] != '%')) break;
      const char op = s_[p_++];
      auto b = unary();
      if (!b) return std::nullopt;
      if (op != '*' && *b == 0) return std::nullopt;
      a = op == '*' ? *a * *b : op == '/' ? *a / *b : *a % *b;
    }
    return a;
  }
  std::optional<int64_t> unary() {
    blanks();
    if (p_ < s_.size() && s_[p_] == '-') {
      ++p_;
      auto v = unary();
      if (v) return -*v;
      return std::nullopt;
    }
    return atom();
  }
  std::optional<int64_t> atom() {
    blanks();
    if (p_ >= s_.size()) return std::nullopt;
    if (s_[p_] == '(') {
      ++p_;
      auto v = sum();
      blanks();
      if (!v || p_ >= s_.size() || s_[p_] != ')') return std::nullopt;
      ++p_;
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(s_[p_]))) {
      int64_t v = 0;
      while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) v = v * 10 + (s_[p_++] - '0');
      return v;
    }
    if (s_[p_] == '$') ++p_;
    bool braces = p_ < s_.size() && s_[p_] == '{';
    if (braces) ++p_;
    const size_t start = p_;
    while (p_ < s_.size() && is_name_char(s_[p_])) ++p_;
    if (p_ == start) return std::nullopt;
    const std::string name = s_.substr(start, p_ - start);
    if (braces) {
      if (p_ >= s_.size() || s_[p_] != '}') return std::nullopt;
      ++p_;
    }
    auto it = vars_.find(name);
    if (it == vars_.end()) return std::nullopt;
    Arithmetic inner(it->second, vars_);
    return inner.eval();
  }

  std::string s_;
  const std::map<std::string, std::string>& vars_;
  size_t p_ = 0;
};

/// Runs the statements' assignments in order and finds the training command.
class ShellInterpreter {
 public:
  ShellInterpreter(std::string display_name, std::vector<std::string>* unresolved)
      : file_(std::move(display_name)), unresolved_(unresolved) {}

  std::vector<MegatronArg> run(const std::vector<Statement>& statements) {
    std::optional<std::vector<MegatronArg>> found;
    int found_line = 0;
    for (const Statement& st : statements) {
      size_t k = 0;
      const std::vector<Word>& w = st.words;
      const std::string first = literal_of(w[0]);
      if (first == "export" || first == "declare" || first == "local" || first == "readonly" || first == "typeset") {
        k = 1;
        while (k < w.size() && literal_of(w[k]).rfind('-', 0) == 0) ++k;  // declare -x / -a
      }
      // Leading assignments: plain statements, or env prefixes of a command.
      for (; k < w.size(); ++k) {
        if (!w[k].array_name.empty()) {
          std::vector<Field> elems;
          for (const Word& e : w[k].array_words)
            for (auto& f : expand(e)) elems.push_back(f);
          arrays_[w[k].array_name] = elems;
          std::string joined;
          for (const auto& e : elems) joined += (joined.empty() ? "" : " ") + e.text;
          vars_[w[k].array_name] = joined;
          var_lines_[w[k].array_name] = w[k].line;
          continue;
        }
        auto name = assignment_name(w[k]);
        if (!name) break;
        Word value = w[k];
        value.segments.front().text.erase(0, name->size() + 1);
        std::string v;
        for (auto& f : expand(value, true)) v += (v.empty() ? "" : " ") + f.text;
        vars_[*name] = v;
        var_lines_[*name] = w[k].line;
      }
      if (k >= w.size()) continue;
      std::vector<Field> fields;
      for (size_t j = k; j < w.size(); ++j)
        for (auto& f : expand(w[j])) fields.push_back(f);
      auto args = training_command(fields);
      if (!args) continue;
      if (found) {
        if (unresolved_)
          unresolved_->push_back("line " + std::to_string(st.line) + ": another training command; only the one at line " +
                                 std::to_string(found_line) + " was imported");
        continue;
      }
      found = std::move(args);
      found_line = st.line;
    }
    if (!found) {
      SourceLoc where;
      where.file = file_;
      throw InputError(where, "", "no training command found (no line runs a *.py script with -- options)",
                       "pass the launch script or the torchrun/python line that starts pretrain_gpt.py");
    }
    return *found;
  }

 private:
  struct Field {
    std::string text;
    int line = 0;
    int column = 0;
  };

  static std::string literal_of(const Word& w) {
    std::string s;
    for (const auto& seg : w.segments) {
      if (seg.expansion) return s + "\x01";  // not a plain literal
      s += seg.text;
    }
    return s;
  }

  static std::optional<std::string> assignment_name(const Word& w) {
    if (w.segments.empty() || w.segments[0].expansion || w.segments[0].quoted) return std::nullopt;
    const std::string& s = w.segments[0].text;
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0 || !is_name_start(s[0])) return std::nullopt;
    for (size_t i = 0; i < eq; ++i)
      if (!is_name_char(s[i])) return std::nullopt;
    return s.substr(0, eq);
  }

  void note_unresolved(const std::string& what, int line) {
    if (!unresolved_) return;
    const std::string msg = display(file_) + ":" + std::to_string(line) + ": cannot resolve " + what;
    if (std::find(unresolved_->begin(), unresolved_->end(), msg) == unresolved_->end()) unresolved_->push_back(msg);
  }

  /// Value of one expansion; std::nullopt when it cannot be resolved (the text stays as written).
  /// `words` receives the elements of `${NAME[@]}` (with their lines); `def_line` the line that set a variable.
  std::optional<std::string> resolve(const std::string& e, int line, std::vector<Field>* words, int* def_line) {
    if (e.rfind("$((", 0) == 0 && e.size() >= 5) {
      Arithmetic a(e.substr(3, e.size() - 5), vars_);
      if (auto v = a.eval()) return std::to_string(*v);
      note_unresolved("arithmetic '" + e + "' (a variable in it is not set in the script)", line);
      return std::nullopt;
    }
    if (e.rfind("$(", 0) == 0 || e.rfind("`", 0) == 0) {
      note_unresolved("command substitution '" + e + "' (hcpsim does not run commands)", line);
      return std::nullopt;
    }
    std::string body = e.substr(1);
    if (!body.empty() && body.front() == '{') body = body.substr(1, body.size() - 2);
    if (body.empty() || !is_name_start(body[0])) {
      note_unresolved("'" + e + "' (a script argument)", line);
      return std::nullopt;
    }
    size_t n = 0;
    while (n < body.size() && is_name_char(body[n])) ++n;
    const std::string name = body.substr(0, n);
    const std::string rest = body.substr(n);
    if (rest == "[@]" || rest == "[*]") {
      auto it = arrays_.find(name);
      if (it != arrays_.end()) {
        if (words) *words = it->second;
        std::string joined;
        for (const auto& x : it->second) joined += (joined.empty() ? "" : " ") + x.text;
        return joined;
      }
    }
    auto it = vars_.find(name);
    const bool has_default = rest.rfind(":-", 0) == 0 || rest.rfind(":=", 0) == 0 || rest.rfind("-", 0) == 0;
    if (has_default) {
      const bool colon = rest[0] == ':';
      const bool use_default = it == vars_.end() || (colon && it->second.empty());
      if (!use_default) return it->second;
      const std::string dflt = rest.substr(colon ? 2 : 1);
      // The default may itself hold expansions: lex it as one word.
      ShellLexer lx(dflt);
      auto sts = lx.run();
      std::string v;
      if (!sts.empty())
        for (const auto& w : sts[0].words)
          for (auto& f : expand(w, true)) v += (v.empty() ? "" : " ") + f.text;
      if (rest.rfind(":=", 0) == 0) vars_[name] = v;
      return v;
    }
    if (it != vars_.end() && (rest.empty() || rest == "[@]" || rest == "[*]")) {
      if (def_line && var_lines_.count(name)) *def_line = var_lines_.at(name);
      return it->second;
    }
    note_unresolved("'" + e + "' (" + name + " is not set in the script)", line);
    return std::nullopt;
  }

  /// Expands one word into fields (unquoted expansions split on blanks; `"${A[@]}"` gives one field per element).
  std::vector<Field> expand(const Word& w, bool no_split = false) {
    std::vector<Field> out;
    if (!w.array_name.empty()) return out;
    std::string cur;
    bool have = false;
    for (const Segment& s : w.segments) {
      if (!s.expansion) {
        cur += s.text;
        have = true;
        continue;
      }
      std::vector<Field> elems;
      int def_line = 0;
      auto v = resolve(s.text, w.line, &elems, &def_line);
      if (!v) {
        cur += s.text;
        have = true;
        continue;
      }
      if (!elems.empty() && (s.quoted || !no_split) && w.segments.size() == 1) {
        for (const auto& e : elems) out.push_back(e);
        return out;
      }
      if (s.quoted || no_split) {
        cur += *v;
        have = true;
        continue;
      }
      std::istringstream in(*v);
      std::string piece;
      std::vector<std::string> pieces;
      while (in >> piece) pieces.push_back(piece);
      const bool lead_blank = !v->empty() && std::isspace(static_cast<unsigned char>(v->front()));
      const bool trail_blank = !v->empty() && std::isspace(static_cast<unsigned char>(v->back()));
      // A word that comes whole from a variable gets the line that set the variable (the flag's own line).
      const int piece_line = w.segments.size() == 1 && def_line > 0 ? def_line : w.line;
      const int piece_column = piece_line == w.line ? w.column : 0;
      for (size_t i = 0; i < pieces.size(); ++i) {
        if (i > 0 || lead_blank) {
          if (have) out.push_back({cur, piece_line, piece_column});
          cur.clear();
          have = false;
        }
        cur += pieces[i];
        have = true;
      }
      if (w.segments.size() == 1 && have) {
        out.push_back({cur, piece_line, piece_column});
        cur.clear();
        have = false;
      }
      if (trail_blank && have) {
        out.push_back({cur, w.line, w.column});
        cur.clear();
        have = false;
      }
    }
    if (have) out.push_back({cur, w.line, w.column});
    return out;
  }

  static bool is_option(const std::string& s) {
    if (s.size() < 2 || s[0] != '-') return false;
    if (s[1] == '-') return s.size() > 2;
    return std::isalpha(static_cast<unsigned char>(s[1]));
  }

  /// Options and their values; `--flag=value` is split.
  static std::vector<MegatronArg> options(const std::vector<Field>& f, size_t begin, size_t end, bool launcher,
                                          std::vector<std::string>& stray) {
    std::vector<MegatronArg> out;
    for (size_t i = begin; i < end; ++i) {
      if (!is_option(f[i].text)) {
        if (out.empty()) {
          stray.push_back(f[i].text);
        } else {
          out.back().values.push_back(f[i].text);
        }
        continue;
      }
      MegatronArg a;
      std::string flag = f[i].text;
      const auto eq = flag.find('=');
      if (eq != std::string::npos) {
        a.values.push_back(flag.substr(eq + 1));
        flag.resize(eq);
      }
      a.flag = flag;
      a.name = flag.substr(flag.find_first_not_of('-'));
      std::replace(a.name.begin(), a.name.end(), '-', '_');
      a.line = f[i].line;
      a.column = f[i].column;
      a.from_launcher = launcher;
      out.push_back(std::move(a));
    }
    return out;
  }

  std::optional<std::vector<MegatronArg>> training_command(const std::vector<Field>& f) {
    size_t script = f.size();
    for (size_t i = 0; i < f.size(); ++i) {
      const std::string& s = f[i].text;
      if (s.size() > 3 && s.compare(s.size() - 3, 3, ".py") == 0 && !is_option(s)) {
        bool has_options = false;
        for (size_t j = i + 1; j < f.size(); ++j) has_options = has_options || is_option(f[j].text);
        if (has_options) {
          script = i;
          break;
        }
      }
    }
    if (script == f.size()) return std::nullopt;
    // Launcher options: after `torchrun` or `-m torch.distributed.run|launch`, before the script.
    size_t launcher = f.size();
    for (size_t i = 0; i < script; ++i) {
      const std::string base = std::filesystem::path(f[i].text).filename().string();
      if (base == "torchrun") launcher = i + 1;
      if (f[i].text == "-m" && i + 1 < script &&
          (f[i + 1].text == "torch.distributed.run" || f[i + 1].text == "torch.distributed.launch"))
        launcher = i + 2;
    }
    std::vector<std::string> stray;
    std::vector<MegatronArg> out;
    if (launcher < script) out = options(f, launcher, script, true, stray);
    auto main = options(f, script + 1, f.size(), false, stray);
    out.insert(out.end(), main.begin(), main.end());
    return out;
  }

  std::string file_;
  std::vector<std::string>* unresolved_;
  std::map<std::string, std::string> vars_;
  std::map<std::string, std::vector<Field>> arrays_;
  std::map<std::string, int> var_lines_;
};

// ---------------------------------------------------------------------------------------------------------------
// Arguments → MegatronConfig
// ---------------------------------------------------------------------------------------------------------------

std::string strip(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

/// A Python repr list "[8, 2]" / "['p2p', 'a2a']" → its items; a plain value → itself.
std::vector<std::string> python_list(const std::string& text) {
  const std::string t = strip(text);
  if (t.size() < 2 || t.front() != '[' || t.back() != ']') return {t};
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(t.substr(1, t.size() - 2));
  while (std::getline(in, item, ',')) {
    std::string v = strip(item);
    if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
    if (!v.empty()) out.push_back(v);
  }
  return out;
}

std::string scenario_name_of(const std::string& path, const std::string& fallback) {
  std::string stem = path == "-" ? fallback : std::filesystem::path(path).stem().string();
  for (char& c : stem)
    if (!is_name_char(c) && c != '-' && c != '.') c = '_';
  return stem.empty() ? fallback : stem;
}

class ArgInterpreter {
 public:
  ArgInterpreter(const std::vector<MegatronArg>& args, const std::string& display_name, bool log_block)
      : file_(display_name), log_(log_block) {
    for (const auto& a : args) {
      std::string name = a.name;
      if (name == "nproc_per_node" || name == "nnodes") {
        if (!a.from_launcher && !log_) {
          unread_.push_back(a);
          continue;
        }
      }
      if (name == "fp8") name = "fp8_format";  // Megatron stores --fp8-format in args.fp8
      if (!log_ || !is_none(a)) last_[name] = a;  // argparse: the last occurrence wins
      else last_.erase(name);
      order_.push_back(a);
    }
    cfg_.source_path = display_name;
  }

  MegatronConfig run() {
    read_model();
    read_parallel();
    read_training();
    read_launch();
    if (!log_) {
      for (const auto& a : order_) {
        std::string name = a.name == "fp8" ? std::string("fp8_format") : a.name;
        if (used_.count(name) && last_.count(name) && last_.at(name).line == a.line && last_.at(name).flag == a.flag)
          continue;
        std::string text = a.flag;
        for (const auto& v : a.values) text += " " + v;
        if (used_.count(name)) text += "  (overridden by a later " + a.flag + ")";
        cfg_.ignored.push_back(text);
      }
      for (const auto& a : unread_) {
        std::string text = a.flag;
        for (const auto& v : a.values) text += " " + v;
        cfg_.ignored.push_back(text + "  (a launcher option after the training script)");
      }
    }
    return std::move(cfg_);
  }

 private:
  bool is_none(const MegatronArg& a) const { return a.values.size() == 1 && a.values[0] == "None"; }

  const MegatronArg* get(const std::string& name) {
    used_.insert(name);
    auto it = last_.find(name);
    if (it == last_.end()) return nullptr;
    cfg_.lines[name] = it->second.line;
    cfg_.columns[name] = it->second.column;
    return &it->second;
  }

  SourceLoc where(const MegatronArg& a) const {
    SourceLoc l;
    l.file = display(file_);
    l.line = a.line;
    l.column = a.line > 0 ? std::max(a.column, 1) : 0;
    return l;
  }

  std::string joined(const MegatronArg& a) const {
    std::string s;
    for (const auto& v : a.values) s += (s.empty() ? "" : " ") + v;
    return s;
  }

  [[noreturn]] void bad_value(const MegatronArg& a, const std::string& expected) const {
    const std::string v = joined(a);
    const auto dollar = v.find_first_of("$`");
    if (dollar != std::string::npos) {
      std::string var;
      size_t k = dollar + 1;
      if (k < v.size() && v[k] == '{') ++k;
      while (k < v.size() && is_name_char(v[k])) var += v[k++];
      throw InputError(where(a), a.flag,
                       "cannot resolve '" + v + "'" + (var.empty() ? "" : " (" + var + " is not set in the script)"),
                       var.empty() ? "write the value itself instead of the shell expression"
                                   : "set " + var + "=<value> in the script before the command, or write the value");
    }
    throw InputError(where(a), a.flag, "expected " + expected + ", got '" + v + "'",
                     "write " + expected + ", e.g. '" + a.flag + " 8'");
  }

  std::optional<int64_t> get_int(const std::string& name) {
    const MegatronArg* a = get(name);
    if (!a) return std::nullopt;
    if (a->values.size() != 1) bad_value(*a, "one integer");
    const std::string& s = a->values[0];
    try {
      size_t pos = 0;
      const long long v = std::stoll(s, &pos, 10);
      if (pos != s.size()) bad_value(*a, "an integer");
      return v;
    } catch (const std::invalid_argument&) {
      bad_value(*a, "an integer");
    } catch (const std::out_of_range&) {
      bad_value(*a, "an integer");
    }
  }

  std::optional<std::vector<int64_t>> get_int_list(const std::string& name) {
    const MegatronArg* a = get(name);
    if (!a) return std::nullopt;
    std::vector<std::string> items;
    for (const auto& v : a->values)
      for (auto& x : log_ ? python_list(v) : std::vector<std::string>{v}) items.push_back(x);
    if (items.empty()) bad_value(*a, "a list of integers");
    std::vector<int64_t> out;
    for (const auto& s : items) {
      try {
        size_t pos = 0;
        const long long v = std::stoll(s, &pos, 10);
        if (pos != s.size()) bad_value(*a, "integers");
        out.push_back(v);
      } catch (const std::invalid_argument&) {
        bad_value(*a, "integers");
      } catch (const std::out_of_range&) {
        bad_value(*a, "integers");
      }
    }
    return out;
  }

  bool get_switch(const std::string& name) {
    const MegatronArg* a = get(name);
    if (!a) return false;
    if (a->values.empty()) return true;
    if (a->values.size() == 1 && (a->values[0] == "True" || a->values[0] == "true")) return true;
    if (a->values.size() == 1 && (a->values[0] == "False" || a->values[0] == "false")) return false;
    throw InputError(where(*a), a->flag, "a switch takes no value, got '" + joined(*a) + "'",
                     "write '" + a->flag + "' alone, or move '" + joined(*a) + "' after the flag it belongs to");
  }

  /// The value of an argument that is only mentioned in a note: it stays in the ignored list.
  std::optional<std::string> peek_word(const std::string& name) const {
    auto it = last_.find(name);
    if (it == last_.end() || it->second.values.size() != 1) return std::nullopt;
    return it->second.values[0];
  }

  std::optional<std::string> get_word(const std::string& name) {
    const MegatronArg* a = get(name);
    if (!a) return std::nullopt;
    if (a->values.size() != 1) bad_value(*a, "one value");
    return a->values[0];
  }

  void read_model() {
    cfg_.num_attention_heads = get_int("num_attention_heads");
    cfg_.hidden_size = get_int("hidden_size");
    const bool gqa = get_switch("group_query_attention");
    const auto groups = get_int("num_query_groups");
    if (gqa && groups) {
      cfg_.num_query_groups = groups;
    } else {
      // Source: arguments.py core_transformer_config_from_args: num_query_groups only with --group-query-attention.
      cfg_.num_query_groups = cfg_.num_attention_heads;
      if (groups && !log_ && *groups != cfg_.num_attention_heads.value_or(-1))
        cfg_.notes.push_back("--num-query-groups " + std::to_string(*groups) +
                             " has no effect without --group-query-attention (Megatron uses MHA); imported as MHA");
      if (cfg_.lines.count("num_attention_heads")) {
        cfg_.lines["num_query_groups"] = cfg_.lines["num_attention_heads"];
        cfg_.columns["num_query_groups"] = cfg_.columns["num_attention_heads"];
      }
    }
    cfg_.kv_channels = get_int("kv_channels");
    if (!cfg_.kv_channels && cfg_.hidden_size && cfg_.num_attention_heads && *cfg_.num_attention_heads > 0) {
      cfg_.kv_channels = default_kv_channels(*cfg_.hidden_size, *cfg_.num_attention_heads);
      cfg_.notes.push_back("kv_channels not set: hidden_size / num_attention_heads = " +
                           std::to_string(*cfg_.kv_channels) + " (Megatron's rule)");
    }
    cfg_.seq_length = get_int("seq_length");
    if (auto v = get_int("micro_batch_size")) cfg_.micro_batch_size = *v;
    cfg_.global_batch_size = get_int("global_batch_size");
    cfg_.num_layers = get_int("num_layers");
    cfg_.gated_linear_unit = get_switch("swiglu");
    cfg_.ffn_hidden_size = get_int("ffn_hidden_size");
    if (!cfg_.ffn_hidden_size && cfg_.hidden_size) {
      cfg_.ffn_hidden_size = default_ffn_hidden_size(*cfg_.hidden_size, cfg_.gated_linear_unit,
                                                     MegatronConfigSource::megatron_lm_arguments);
      cfg_.notes.push_back("ffn_hidden_size not set: " + std::to_string(*cfg_.ffn_hidden_size) +
                           (cfg_.gated_linear_unit ? " (Megatron's SwiGLU rule int(8*hidden/3/64)*64)"
                                                   : " (Megatron's rule 4*hidden_size)"));
    }
    cfg_.vocab_size = get_int("vocab_size");
    if (!cfg_.vocab_size) {
      std::string tok;
      if (auto t = peek_word("tokenizer_type")) tok = *t;
      if (auto m = peek_word("tokenizer_model")) tok += (tok.empty() ? "" : " ") + *m;
      cfg_.notes.push_back("vocab_size not set: Megatron takes it from the tokenizer" +
                           (tok.empty() ? std::string() : " (" + tok + ")") +
                           "; model.vocab_size is left out, set it for the whole-step model (e.g. 128256 for Llama 3)");
    }
    cfg_.untie_embeddings_and_output_weights = get_switch("untie_embeddings_and_output_weights");
    const bool bf16 = get_switch("bf16");
    const bool fp16 = get_switch("fp16");
    cfg_.params_dtype = bf16 ? "bf16" : fp16 ? "fp16" : "fp32";
  }

  void read_parallel() {
    if (auto v = get_int("tensor_model_parallel_size")) cfg_.tensor_model_parallel_size = *v;
    if (auto v = get_int("pipeline_model_parallel_size")) cfg_.pipeline_model_parallel_size = *v;
    if (auto v = get_int("context_parallel_size")) cfg_.context_parallel_size = *v;
    cfg_.virtual_pipeline_model_parallel_size = get_int("virtual_pipeline_model_parallel_size");
    const auto per_stage = get_int("num_layers_per_virtual_pipeline_stage");
    if (!cfg_.virtual_pipeline_model_parallel_size && per_stage) {
      const MegatronArg& a = *get("num_layers_per_virtual_pipeline_stage");
      if (!cfg_.num_layers || *per_stage <= 0 ||
          *cfg_.num_layers % cfg_.pipeline_model_parallel_size != 0 ||
          (*cfg_.num_layers / cfg_.pipeline_model_parallel_size) % *per_stage != 0)
        throw InputError(where(a), a.flag,
                         "cannot derive the virtual pipeline size: num_layers / pipeline_model_parallel_size must be a "
                         "multiple of " + std::to_string(*per_stage),
                         "give --num-layers and a --num-layers-per-virtual-pipeline-stage that divides the layers of "
                         "one stage, or --virtual-pipeline-model-parallel-size");
      // Source: arguments.py validate_args: (num_layers / PP) / num_layers_per_virtual_pipeline_stage.
      cfg_.virtual_pipeline_model_parallel_size = *cfg_.num_layers / cfg_.pipeline_model_parallel_size / *per_stage;
      cfg_.lines["virtual_pipeline_model_parallel_size"] = a.line;
      cfg_.columns["virtual_pipeline_model_parallel_size"] = a.column;
    }
    if (const MegatronArg* a = get("cp_comm_type")) {
      std::vector<std::string> items;
      for (const auto& v : a->values)
        for (auto& x : log_ ? python_list(v) : std::vector<std::string>{v}) items.push_back(x);
      if (items.empty()) bad_value(*a, "p2p, a2a, a2a+p2p or allgather");
      for (auto& x : items) {
        if (x == "allgather") x = "all_gather";  // Megatron's spelling of TE's all_gather
        if (x != "p2p" && x != "a2a" && x != "a2a+p2p" && x != "all_gather")
          throw InputError(where(*a), a->flag, "unknown cp_comm_type '" + x + "'",
                           "use p2p, a2a, a2a+p2p or allgather (one value, or one per layer)");
      }
      cfg_.cp_comm_type = items;
    }
    cfg_.hierarchical_context_parallel_sizes = get_int_list("hierarchical_context_parallel_sizes");
    cfg_.sequence_parallel = get_switch("sequence_parallel");
    cfg_.use_distributed_optimizer = get_switch("use_distributed_optimizer");
    cfg_.overlap_grad_reduce = get_switch("overlap_grad_reduce");
    cfg_.overlap_param_gather = get_switch("overlap_param_gather");
  }

  void read_training() {
    if (auto g = get_word("recompute_granularity")) {
      const MegatronArg& a = *get("recompute_granularity");
      if (*g != "full" && *g != "selective")
        throw InputError(where(a), a.flag, "unknown recompute granularity '" + *g + "'", "use full or selective");
      cfg_.recompute_granularity = *g;
    } else if (get_switch("recompute_activations")) {
      // Source: arguments.py validate_args: --recompute-activations sets recompute_granularity = 'selective'.
      cfg_.recompute_granularity = "selective";
      cfg_.lines["recompute_granularity"] = cfg_.lines["recompute_activations"];
      cfg_.columns["recompute_granularity"] = cfg_.columns["recompute_activations"];
    }
    if (auto m = get_word("recompute_method")) {
      if (cfg_.recompute_granularity == "full" && *m != "uniform")
        cfg_.notes.push_back("recompute_method " + *m + ": the model recomputes every layer of a stage (uniform)");
    }
    if (auto f = get_word("fp8_format")) cfg_.fp8 = true;
  }

  void read_launch() {
    auto nnodes = get("nnodes");
    auto nproc = get("nproc_per_node");
    auto as_count = [&](const MegatronArg* a) -> std::optional<int64_t> {
      if (!a) return std::nullopt;
      if (a->values.size() == 1) {
        const std::string& s = a->values[0];
        if (!s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
          return std::stoll(s);
        if (s.find(':') != std::string::npos && s.find('$') == std::string::npos)
          throw InputError(where(*a), a->flag, "elastic node range '" + s + "' is not modelled",
                           "give a fixed node count, e.g. '" + a->flag + " " + s.substr(s.find(':') + 1) + "'");
        if (s == "gpu" || s == "auto") {
          cfg_.notes.push_back(a->flag + " " + s + ": GPUs per node taken from the cluster preset");
          return std::nullopt;
        }
      }
      bad_value(*a, "a count");
    };
    cfg_.nnodes = as_count(nnodes);
    cfg_.nproc_per_node = as_count(nproc);
    if (cfg_.nnodes && cfg_.nproc_per_node) cfg_.world_size = *cfg_.nnodes * *cfg_.nproc_per_node;
    if (log_) cfg_.world_size = get_int("world_size");
  }

  std::string file_;
  bool log_;
  std::map<std::string, MegatronArg> last_;
  std::vector<MegatronArg> order_;
  std::vector<MegatronArg> unread_;
  std::set<std::string> used_;
  MegatronConfig cfg_;
};

// ---------------------------------------------------------------------------------------------------------------
// YAML writing
// ---------------------------------------------------------------------------------------------------------------

class YamlWriter {
 public:
  explicit YamlWriter(const MegatronConfig& c) : c_(c) {}

  void comment(const std::string& text) { out_ += "# " + text + "\n"; }
  void section(const std::string& name) {
    out_ += name + ":\n";
    section_ = name;
  }
  /// `  key: value   # from file:line`, the comment naming the Megatron argument behind the value.
  void entry(const std::string& key, const std::string& value, const std::string& why = "") {
    std::string line = (section_.empty() ? "" : "  ") + key + ": " + value;
    std::string note = why;
    if (note.empty()) {
      const std::string full = section_.empty() ? key : section_ + "." + key;
      for (const auto& n : MegatronConfig::megatron_names_of(full)) {
        auto it = c_.lines.find(n);
        if (it != c_.lines.end() && it->second > 0) {
          note = n + ", line " + std::to_string(it->second);
          break;
        }
      }
    }
    if (!note.empty()) {
      if (line.size() < kCommentColumn) line.append(kCommentColumn - line.size(), ' ');
      line += "  # " + note;
    }
    out_ += line + "\n";
  }
  void raw(const std::string& line) { out_ += line + "\n"; }
  void top() { section_.clear(); }
  [[nodiscard]] const std::string& text() const { return out_; }

 private:
  static constexpr size_t kCommentColumn = 48;  // aligns the source comments for reading
  const MegatronConfig& c_;
  std::string out_;
  std::string section_;
};

std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string yaml_bool(bool b) { return b ? "true" : "false"; }

}  // namespace

std::optional<int64_t> MegatronConfig::data_parallel_size() const {
  if (!world_size) return std::nullopt;
  const int64_t model = tensor_model_parallel_size * context_parallel_size * pipeline_model_parallel_size;
  if (model <= 0 || *world_size % model != 0) {
    SourceLoc l = loc_of_scenario_key("parallel.data_parallel_size");
    throw InputError(l, "parallel.data_parallel_size",
                     "world size " + std::to_string(*world_size) + " is not divisible by TP*CP*PP = " +
                         std::to_string(tensor_model_parallel_size) + "*" + std::to_string(context_parallel_size) +
                         "*" + std::to_string(pipeline_model_parallel_size) + " = " + std::to_string(model),
                     "make nnodes*nproc_per_node a multiple of " + std::to_string(model) +
                         ", or change the parallel sizes");
  }
  // Source: arguments.py validate_args: data_parallel_size = world_size // (TP·PP·CP).
  return *world_size / model;
}

std::vector<std::string> MegatronConfig::megatron_names_of(const std::string& key) {
  static const std::map<std::string, std::vector<std::string>> kNames{
      {"model.num_query_groups", {"num_query_groups", "group_query_attention", "num_attention_heads"}},
      {"model.kv_channels", {"kv_channels", "hidden_size", "num_attention_heads"}},
      {"model.kv_channels_v", {"kv_channels", "hidden_size"}},
      {"model.gated_linear_unit", {"swiglu"}},
      {"model.params_dtype", {"bf16", "fp16"}},
      {"model.ffn_hidden_size", {"ffn_hidden_size", "hidden_size"}},
      {"parallel.data_parallel_size", {"world_size", "nnodes", "nproc_per_node"}},
      {"parallel.virtual_pipeline_model_parallel_size",
       {"virtual_pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage"}},
      {"parallel.hierarchical_context_parallel_sizes",
       {"hierarchical_context_parallel_sizes", "cp_comm_type", "context_parallel_size"}},
      {"parallel.cp_comm_type", {"cp_comm_type", "context_parallel_size"}},
      {"training.recompute_granularity", {"recompute_granularity", "recompute_activations"}},
      {"training.fp8", {"fp8_format"}},
      {"cluster", {"nnodes", "nproc_per_node", "world_size"}},
      {"cluster.nodes", {"nnodes", "world_size", "nproc_per_node"}},
      {"cluster.gpus_per_node", {"nproc_per_node"}},
  };
  auto it = kNames.find(key);
  if (it != kNames.end()) return it->second;
  const auto dot = key.find('.');
  if (dot == std::string::npos) return {};
  std::string leaf = key.substr(dot + 1);
  const auto dot2 = leaf.find('.');
  if (dot2 != std::string::npos) leaf.resize(dot2);
  return {leaf};
}

SourceLoc MegatronConfig::loc_of_scenario_key(const std::string& key) const {
  SourceLoc l;
  l.file = display(source_path);
  for (const auto& n : megatron_names_of(key)) {
    auto it = lines.find(n);
    if (it != lines.end() && it->second > 0) {
      l.line = it->second;
      auto col = columns.find(n);
      l.column = col != columns.end() && col->second > 0 ? col->second : 1;
      return l;
    }
  }
  return l;
}

std::vector<MegatronArg> split_megatron_command_line(const std::string& text, const std::string& display_name,
                                                     std::vector<std::string>* unresolved) {
  ShellLexer lexer(text);
  const auto statements = lexer.run();
  ShellInterpreter interp(display_name, unresolved);
  return interp.run(statements);
}

MegatronConfig interpret_megatron_args(const std::vector<MegatronArg>& args, const std::string& display_name,
                                       bool log_block) {
  ArgInterpreter in(args, display_name, log_block);
  MegatronConfig c = in.run();
  c.name = scenario_name_of(display_name, "megatron_args");
  return c;
}

MegatronConfig parse_bridge_config(const std::string& text, const std::string& display_name) {
  YAML::Node root;
  SourceLoc where;
  where.file = display(display_name);
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    where.line = e.mark.line + 1;
    where.column = e.mark.column + 1;
    throw InputError(where, "", "not valid YAML: " + e.msg, "fix the YAML syntax at this position");
  }
  if (!root.IsMap() || !root["model"])
    throw InputError(where, "model", "not a Megatron-Bridge config: no 'model:' section",
                     "pass a ConfigContainer YAML (sections model:, train:, ddp:, dist:, ...)");

  MegatronConfig c;
  c.source_path = display_name;
  c.name = scenario_name_of(display_name, "bridge_config");

  auto loc = [&](const YAML::Node& n) {
    SourceLoc l = where;
    if (n.Mark().line >= 0 && !n.Mark().is_null()) {
      l.line = n.Mark().line + 1;
      l.column = n.Mark().column + 1;
    }
    return l;
  };
  auto mark = [&](const std::string& name, const YAML::Node& n) {
    c.lines[name] = loc(n).line;
    c.columns[name] = loc(n).column;
  };
  auto scalar_text = [](const YAML::Node& n) {
    if (n.IsScalar()) return n.Scalar();
    if (n.IsNull()) return std::string("null");
    YAML::Emitter e;
    e << YAML::Flow << n;
    return std::string(e.c_str());
  };
  auto is_null = [](const YAML::Node& n) {
    return n.IsNull() || (n.IsScalar() && (n.Scalar() == "null" || n.Scalar() == "None" || n.Scalar() == "~"));
  };
  auto as_int = [&](const YAML::Node& n, const std::string& key) -> int64_t {
    const std::string s = n.IsScalar() ? n.Scalar() : "";
    try {
      size_t pos = 0;
      const long long v = std::stoll(s, &pos, 10);
      if (pos == s.size()) return v;
    } catch (const std::exception&) {
    }
    throw InputError(loc(n), key, "expected an integer, got '" + scalar_text(n) + "'", "write a whole number");
  };
  auto as_bool = [&](const YAML::Node& n, const std::string& key) -> bool {
    const std::string s = n.IsScalar() ? n.Scalar() : "";
    if (s == "true" || s == "True") return true;
    if (s == "false" || s == "False") return false;
    throw InputError(loc(n), key, "expected true or false, got '" + scalar_text(n) + "'", "write true or false");
  };
  auto ignore = [&](const std::string& key, const YAML::Node& n, auto&& self) -> void {
    if (n.IsMap()) {
      for (auto it = n.begin(); it != n.end(); ++it) {
        const std::string k = it->first.as<std::string>();
        if (!k.empty() && k[0] == '_') continue;  // `_target_` and similar Hydra metadata
        self(key + "." + k, it->second, self);
      }
      return;
    }
    c.ignored.push_back(key + ": " + scalar_text(n));
  };

  // Bridge key → Megatron argument name (for line numbers and messages).
  static const std::map<std::string, std::string> kModelInts{
      {"num_attention_heads", "num_attention_heads"}, {"num_query_groups", "num_query_groups"},
      {"kv_channels", "kv_channels"}, {"seq_length", "seq_length"}, {"hidden_size", "hidden_size"},
      {"ffn_hidden_size", "ffn_hidden_size"}, {"num_layers", "num_layers"}, {"vocab_size", "vocab_size"},
      {"tensor_model_parallel_size", "tensor_model_parallel_size"},
      {"pipeline_model_parallel_size", "pipeline_model_parallel_size"},
      {"virtual_pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size"},
      {"context_parallel_size", "context_parallel_size"}};

  bool bf16 = false, fp16 = false;
  for (auto sec = root.begin(); sec != root.end(); ++sec) {
    const std::string section = sec->first.as<std::string>();
    const YAML::Node m = sec->second;
    if (section == "mixed_precision") {
      if (m.IsScalar() && !is_null(m)) {
        // Source: Megatron-Bridge mixed_precision recipes: "bf16_mixed", "fp16_mixed", "bf16_with_fp8_..._mixed".
        const std::string s = m.Scalar();
        bf16 = s.rfind("bf16", 0) == 0;
        fp16 = s.rfind("fp16", 0) == 0;
        if (s.find("fp8") != std::string::npos) c.fp8 = true;
        mark("bf16", m);
        mark("fp16", m);
        if (c.fp8) mark("fp8_format", m);
      } else if (m.IsMap()) {
        for (auto it = m.begin(); it != m.end(); ++it) {
          const std::string k = it->first.as<std::string>();
          if (k == "bf16") bf16 = as_bool(it->second, "mixed_precision.bf16");
          else if (k == "fp16") fp16 = as_bool(it->second, "mixed_precision.fp16");
          else if (k == "fp8") c.fp8 = c.fp8 || !is_null(it->second);
          else if (!k.empty() && k[0] != '_') ignore("mixed_precision." + k, it->second, ignore);
          if (k == "bf16" || k == "fp16") mark(k, it->second);
          if (k == "fp8") mark("fp8_format", it->second);
        }
      }
      continue;
    }
    if (!m.IsMap()) {
      if (!section.empty() && section[0] != '_') ignore(section, m, ignore);
      continue;
    }
    for (auto it = m.begin(); it != m.end(); ++it) {
      const std::string k = it->first.as<std::string>();
      const std::string key = section + "." + k;
      const YAML::Node v = it->second;  // a handle: the iterator yields a temporary
      if (!k.empty() && k[0] == '_') continue;
      bool read = true;
      if (section == "model") {
        auto ints = kModelInts.find(k);
        if (ints != kModelInts.end()) {
          if (!is_null(v)) {
            const int64_t x = as_int(v, key);
            mark(ints->second, v);
            if (k == "num_attention_heads") c.num_attention_heads = x;
            else if (k == "num_query_groups") c.num_query_groups = x;
            else if (k == "kv_channels") c.kv_channels = x;
            else if (k == "seq_length") c.seq_length = x;
            else if (k == "hidden_size") c.hidden_size = x;
            else if (k == "ffn_hidden_size") c.ffn_hidden_size = x;
            else if (k == "num_layers") c.num_layers = x;
            else if (k == "vocab_size") c.vocab_size = x;
            else if (k == "tensor_model_parallel_size") c.tensor_model_parallel_size = x;
            else if (k == "pipeline_model_parallel_size") c.pipeline_model_parallel_size = x;
            else if (k == "virtual_pipeline_model_parallel_size") c.virtual_pipeline_model_parallel_size = x;
            else if (k == "context_parallel_size") c.context_parallel_size = x;
          }
        } else if (k == "cp_comm_type") {
          mark("cp_comm_type", v);
          if (!is_null(v)) {
            std::vector<std::string> items;
            if (v.IsSequence()) {
              for (size_t i = 0; i < v.size(); ++i) items.push_back(scalar_text(v[i]));
            } else {
              items.push_back(scalar_text(v));
            }
            for (auto& x : items) {
              if (x == "allgather") x = "all_gather";
              if (x != "p2p" && x != "a2a" && x != "a2a+p2p" && x != "all_gather")
                throw InputError(loc(v), key, "unknown cp_comm_type '" + x + "'",
                                 "use p2p, a2a, a2a+p2p or allgather (one value, or one per layer)");
            }
            c.cp_comm_type = items;
          }
        } else if (k == "hierarchical_context_parallel_sizes") {
          mark(k, v);
          if (!is_null(v)) {
            if (!v.IsSequence())
              throw InputError(loc(v), key, "expected a list of integers", "write e.g. '" + k + ": [8, 2]'");
            std::vector<int64_t> sizes;
            for (size_t i = 0; i < v.size(); ++i) sizes.push_back(as_int(v[i], key));
            c.hierarchical_context_parallel_sizes = sizes;
          }
        } else if (k == "sequence_parallel") {
          c.sequence_parallel = as_bool(v, key);
          mark(k, v);
        } else if (k == "gated_linear_unit") {
          c.gated_linear_unit = as_bool(v, key);
          mark("swiglu", v);
        } else if (k == "share_embeddings_and_output_weights") {
          // Source: Bridge mapping: --untie-embeddings-and-output-weights ↔ share_embeddings_and_output_weights=false.
          c.untie_embeddings_and_output_weights = !as_bool(v, key);
          mark("untie_embeddings_and_output_weights", v);
        } else if (k == "recompute_granularity") {
          mark(k, v);
          if (!is_null(v)) {
            const std::string g = scalar_text(v);
            if (g != "full" && g != "selective")
              throw InputError(loc(v), key, "unknown recompute granularity '" + g + "'", "use full, selective or null");
            c.recompute_granularity = g;
          }
        } else if (k == "fp8") {
          c.fp8 = c.fp8 || !is_null(v);
          mark("fp8_format", v);
        } else if (k == "bf16" || k == "fp16") {
          (k == "bf16" ? bf16 : fp16) = as_bool(v, key);
          mark(k, v);
        } else if (k == "recompute_method" || k == "recompute_num_layers") {
          // read (uniform recomputation is what the model assumes); nothing to write
        } else {
          read = false;
        }
      } else if (section == "train" && (k == "micro_batch_size" || k == "global_batch_size")) {
        if (!is_null(v)) {
          (k == "micro_batch_size" ? c.micro_batch_size : c.global_batch_size.emplace()) = as_int(v, key);
          mark(k, v);
        }
      } else if ((section == "ddp" || section == "optimizer") && k == "use_distributed_optimizer") {
        c.use_distributed_optimizer = c.use_distributed_optimizer || as_bool(v, key);
        mark(k, v);
      } else if (section == "ddp" && (k == "overlap_grad_reduce" || k == "overlap_param_gather")) {
        (k == "overlap_grad_reduce" ? c.overlap_grad_reduce : c.overlap_param_gather) = as_bool(v, key);
        mark(k, v);
      } else if (section == "dist" && k == "use_decentralized_pg") {
        c.use_decentralized_pg = as_bool(v, key);
        mark(k, v);
      } else if (section == "tokenizer" && k == "vocab_size" && !c.vocab_size && !is_null(v)) {
        c.vocab_size = as_int(v, key);
        mark("vocab_size", v);
      } else {
        read = false;
      }
      if (!read) ignore(key, v, ignore);
    }
  }
  c.params_dtype = bf16 ? "bf16" : fp16 ? "fp16" : "fp32";
  // Bridge's TransformerConfig: num_query_groups null means MHA; kv_channels null means hidden / heads.
  if (!c.num_query_groups) c.num_query_groups = c.num_attention_heads;
  if (!c.kv_channels && c.hidden_size && c.num_attention_heads && *c.num_attention_heads > 0) {
    c.kv_channels = default_kv_channels(*c.hidden_size, *c.num_attention_heads);
    c.notes.push_back("kv_channels not set: hidden_size / num_attention_heads = " + std::to_string(*c.kv_channels) +
                      " (Megatron's rule)");
  }
  if (!c.ffn_hidden_size && c.hidden_size) {
    c.ffn_hidden_size =
        default_ffn_hidden_size(*c.hidden_size, c.gated_linear_unit, MegatronConfigSource::transformer_config);
    c.notes.push_back("ffn_hidden_size not set: 4*hidden_size = " + std::to_string(*c.ffn_hidden_size) +
                      " (TransformerConfig default)");
  }
  if (!c.vocab_size)
    c.notes.push_back("vocab_size not set: it comes from the tokenizer; model.vocab_size is left out");
  return c;
}

std::string scenario_yaml_of(const MegatronConfig& c, const ScenarioWriteOptions& opt) {
  SourceLoc file;
  file.file = display(c.source_path);
  auto need = [&](const std::optional<int64_t>& v, const std::string& flag, const std::string& key) {
    if (!v)
      throw InputError(file, key, "not set (" + flag + " is missing)",
                       "add " + flag + " to the command line or config");
    return *v;
  };
  const int64_t heads = need(c.num_attention_heads, "--num-attention-heads / model.num_attention_heads",
                             "model.num_attention_heads");
  const int64_t seq = need(c.seq_length, "--seq-length / model.seq_length", "model.seq_length");
  const int64_t kv = need(c.kv_channels, "--kv-channels or --hidden-size", "model.kv_channels");
  const auto dp = c.data_parallel_size();
  const int64_t model_gpus = c.tensor_model_parallel_size * c.context_parallel_size * c.pipeline_model_parallel_size;
  const int64_t gpn = opt.gpus_per_node > 0 ? opt.gpus_per_node : 8;

  YamlWriter w(c);
  w.comment("Imported by `" + (opt.generator.empty() ? std::string("hcpsim import") : opt.generator) + "` from " +
            display(c.source_path) + ". Comments name the Megatron argument and line behind each value.");
  w.raw("schema_version: 1");
  w.raw("name: " + c.name);
  w.section("model");
  w.entry("num_attention_heads", std::to_string(heads));
  w.entry("num_query_groups", std::to_string(c.num_query_groups.value_or(heads)),
          c.num_query_groups.value_or(heads) == heads ? "MHA (no grouped-query attention)" : "");
  w.entry("kv_channels", std::to_string(kv), c.lines.count("kv_channels") ? "" : "hidden_size / num_attention_heads");
  w.entry("seq_length", std::to_string(seq));
  w.entry("micro_batch_size", std::to_string(c.micro_batch_size),
          c.lines.count("micro_batch_size") ? "" : "Megatron default");
  if (c.global_batch_size) w.entry("global_batch_size", std::to_string(*c.global_batch_size));
  if (c.num_layers) w.entry("num_layers", std::to_string(*c.num_layers));
  if (c.hidden_size) w.entry("hidden_size", std::to_string(*c.hidden_size));
  if (c.ffn_hidden_size)
    w.entry("ffn_hidden_size", std::to_string(*c.ffn_hidden_size),
            c.lines.count("ffn_hidden_size") ? "" : (c.gated_linear_unit ? "SwiGLU default" : "4 * hidden_size"));
  if (c.vocab_size) {
    w.entry("vocab_size", std::to_string(*c.vocab_size));
  } else {
    w.raw("  # vocab_size: not set; Megatron takes it from the tokenizer");
  }
  w.entry("gated_linear_unit", yaml_bool(c.gated_linear_unit));
  w.entry("untie_embeddings_and_output_weights", yaml_bool(c.untie_embeddings_and_output_weights));
  w.entry("params_dtype", c.params_dtype);
  w.section("parallel");
  w.entry("tensor_model_parallel_size", std::to_string(c.tensor_model_parallel_size));
  w.entry("pipeline_model_parallel_size", std::to_string(c.pipeline_model_parallel_size));
  if (c.virtual_pipeline_model_parallel_size)
    w.entry("virtual_pipeline_model_parallel_size", std::to_string(*c.virtual_pipeline_model_parallel_size));
  w.entry("context_parallel_size", std::to_string(c.context_parallel_size));
  int64_t nodes = 1;
  std::optional<int64_t> gpus_per_node;
  if (dp) {
    w.entry("data_parallel_size", std::to_string(*dp), "world / (TP*CP*PP)");
  } else {
    w.entry("data_parallel_size", "1", "world size unknown: assumed 1");
  }
  if (c.cp_comm_type.size() == 1) {
    w.entry("cp_comm_type", c.cp_comm_type[0], c.lines.count("cp_comm_type") ? "" : "Megatron default");
  } else {
    std::string list = "[";
    for (size_t i = 0; i < c.cp_comm_type.size(); ++i) list += (i ? ", " : "") + c.cp_comm_type[i];
    w.entry("cp_comm_type", list + "]");
  }
  if (c.hierarchical_context_parallel_sizes)
    w.entry("hierarchical_context_parallel_sizes", int_list(*c.hierarchical_context_parallel_sizes));
  w.entry("sequence_parallel", yaml_bool(c.sequence_parallel));
  w.entry("use_distributed_optimizer", yaml_bool(c.use_distributed_optimizer));
  w.entry("overlap_grad_reduce", yaml_bool(c.overlap_grad_reduce));
  w.entry("overlap_param_gather", yaml_bool(c.overlap_param_gather));
  w.entry("use_decentralized_pg", yaml_bool(c.use_decentralized_pg));
  w.top();
  w.section("training");
  w.entry("recompute_granularity", c.recompute_granularity);
  w.entry("fp8", yaml_bool(c.fp8));
  w.top();
  std::string nodes_why;
  if (c.nnodes) {
    nodes = *c.nnodes;
    if (c.nproc_per_node && *c.nproc_per_node != gpn) gpus_per_node = c.nproc_per_node;
  } else if (c.world_size) {
    nodes = (*c.world_size + gpn - 1) / gpn;
    nodes_why = "world size " + std::to_string(*c.world_size) + " / " + std::to_string(gpn) + " GPUs per node";
  } else {
    nodes = std::max<int64_t>(1, (model_gpus + gpn - 1) / gpn);
    nodes_why = "no launcher sizes: the nodes TP*CP*PP needs";
  }
  w.section("cluster");
  w.entry("preset", opt.cluster_preset, "--cluster");
  w.entry("nodes", std::to_string(nodes), nodes_why);
  if (gpus_per_node) w.entry("gpus_per_node", std::to_string(*gpus_per_node));
  return w.text();
}

}  // namespace hcpsim
