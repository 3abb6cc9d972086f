// Shell launch script → Megatron argument words: runs the script's assignments in file order (never executing
// anything), expands variables, defaults, arithmetic and arrays, and finds the training command.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "hcpsim/interop/megatron_import.hpp"
#include "input_names.hpp"
#include "shell_arithmetic.hpp"
#include "shell_lexer.hpp"

namespace hcpsim {
namespace {

using shell::eval_shell_arithmetic;
using shell::is_name_char;
using shell::is_name_start;
using shell::lex_shell;
using shell::LineMark;
using shell::Segment;
using shell::Statement;
using shell::Word;
/// (offset in a variable's value, source line): where a quoted value written over several lines moves to the next.
using ValueMarks = std::vector<std::pair<size_t, int>>;
using interop::display;

// Bounds on what one script may ask of the expander, so hostile input ends in an error naming its line instead of
// a stack overflow or gigabytes of text: nesting of expansions inside defaults (`${A:-${B:-...}}`), the number of
// expansions resolved, and the bytes they produce. Real launch scripts stay orders of magnitude below each.
constexpr int kMaxExpansionDepth = 64;
constexpr int64_t kMaxExpansionSteps = 1'000'000;
constexpr size_t kMaxExpandedBytes = size_t{64} << 20;

/// Runs the statements' assignments in order and finds the training command.
class ShellInterpreter {
 public:
  ShellInterpreter(std::string display_name, std::vector<std::string>* unresolved)
      : file_(std::move(display_name)), unresolved_(unresolved) {}

  /// Sets `name` as the job's environment would before the script runs (a Slurm variable an `#SBATCH` directive
  /// decides); the script's own assignments still win.
  void predefine(const std::string& name, const std::string& value, int line, const std::string& why) {
    vars_[name] = value;
    var_lines_[name] = line;
    var_marks_.erase(name);
    if (unresolved_) unresolved_->push_back("$" + name + " = " + value + ", from " + why);
  }

  /// The batch script's #SBATCH counts: what an `srun` without counts of its own inherits from the allocation.
  void set_allocation(std::vector<SbatchSetting> settings) { allocation_ = std::move(settings); }

  /// The training command is the first `*.py` command with options that runs a pretrain*.py script; without
  /// one, the first that a launcher (torchrun, torch.distributed.run) starts; else the first of all. A data
  /// preprocessing step before the training line (tools/preprocess_data.py --input ...) is not taken for it.
  std::vector<MegatronArg> run(const std::vector<Statement>& statements) {
    std::vector<Candidate> candidates;
    for (const Statement& st : statements) {
      const std::vector<Word>& w = st.words;
      const size_t k = assign(w);
      if (k >= w.size()) continue;
      std::vector<Field> fields;
      for (size_t j = k; j < w.size(); ++j)
        for (auto& f : expand(w[j])) fields.push_back(f);
      Candidate c;
      auto args = training_command(fields, c);
      if (!args) continue;
      c.args = std::move(*args);
      c.line = st.line;
      c.blank_continuations = st.blank_continuations;
      candidates.push_back(std::move(c));
    }
    const Candidate* found = nullptr;
    for (const Candidate& c : candidates)
      if (!found || c.rank() > found->rank()) found = &c;
    for (const Candidate& c : candidates) {
      if (&c == found || !unresolved_) continue;
      unresolved_->push_back("line " + std::to_string(c.line) + ": another " + c.script + " command; the " +
                             found->script + " one at line " + std::to_string(found->line) + " was imported" +
                             (found->rank() > c.rank() ? (found->pretrain ? " (a pretrain*.py script)" : " (launched by torchrun)")
                                                       : " (the first)"));
    }
    if (found && unresolved_ && !found->blank_continuations.empty()) {
      const auto& b = found->blank_continuations;
      unresolved_->push_back(
          "line " + std::to_string(b.front()) + ": a backslash followed by blanks" +
          (b.size() > 1 ? " (and on " + std::to_string(b.size() - 1) + " more line(s))" : std::string()) +
          ": bash ends the command there (the backslash escapes the blank), so the real run never saw the options "
          "after it; imported as a continuation, as the script intends: remove the blanks after the backslash");
    }
    if (!found) {
      SourceLoc where;
      where.file = file_;
      throw InputError(where, "", "no training command found (no line runs a *.py script with -- options)",
                       "pass the launch script or the torchrun/python line that starts pretrain_gpt.py");
    }
    return found->args;
  }

 private:
  /// A command that runs a `*.py` script with options.
  struct Candidate {
    std::vector<MegatronArg> args;
    int line = 0;
    std::string script;     ///< the script's file name
    bool pretrain = false;  ///< pretrain*.py (Megatron-LM's pretrain_gpt.py, pretrain_mamba.py, ...)
    bool launched = false;  ///< after torchrun or -m torch.distributed.run / launch
    std::vector<int> blank_continuations;  ///< Statement::blank_continuations
    [[nodiscard]] int rank() const { return pretrain ? 2 : launched ? 1 : 0; }
  };
  struct Field {
    std::string text;
    int line = 0;
    int column = 0;
  };

  /// Runs a statement's leading assignments (after `export`/`declare`/... and their options): plain assignment
  /// statements, or env prefixes of a command. Returns the index of the first command word (size(): none).
  size_t assign(const std::vector<Word>& w) {
    size_t k = 0;
    const std::string first = literal_of(w[0]);
    if (first == "export" || first == "declare" || first == "local" || first == "readonly" || first == "typeset") {
      k = 1;
      while (k < w.size() && literal_of(w[k]).rfind('-', 0) == 0) ++k;  // declare -x / -a
    }
    for (; k < w.size(); ++k) {
      if (!w[k].array_name.empty()) {
        assign_array(w[k]);
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
      var_marks_[*name] = value_marks(value, name->size() + 1);
    }
    return k;
  }

  /// Where the value of a literal assignment (no expansion in it) moves to another line: (offset in the value,
  /// line) from the word's line marks, the first segment having lost `prefix` bytes (`NAME=`). Empty when the value
  /// holds an expansion (its text is then not the script's) or sits on one line.
  static ValueMarks value_marks(const Word& value, size_t prefix) {
    ValueMarks out;
    for (const Segment& seg : value.segments)
      if (seg.expansion) return out;
    std::vector<size_t> starts;  // offset of each segment in the value
    size_t at = 0;
    for (const Segment& seg : value.segments) {
      starts.push_back(at);
      at += seg.text.size();
    }
    for (const LineMark& m : value.line_marks) {
      if (m.segment >= starts.size()) continue;  // after the last segment: no text follows
      const size_t offset = m.segment == 0 ? (m.offset >= prefix ? m.offset - prefix : 0) : m.offset;
      out.emplace_back(starts[m.segment] + offset, m.line);
    }
    return out;
  }

  /// `NAME=( ... )`: the expanded elements (for `${NAME[@]}`), and their blank-joined text as `$NAME`.
  void assign_array(const Word& a) {
    std::vector<Field> elems;
    for (const Word& e : a.array_words)
      for (auto& f : expand(e)) elems.push_back(f);
    arrays_[a.array_name] = elems;
    std::string joined;
    for (const auto& e : elems) joined += (joined.empty() ? "" : " ") + e.text;
    vars_[a.array_name] = joined;
    var_lines_[a.array_name] = a.line;
    var_marks_.erase(a.array_name);
  }

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

  /// @throws InputError at file_:line.
  [[noreturn]] void fail_at(int line, const std::string& problem, const std::string& fix) const {
    SourceLoc where;
    where.file = file_;
    where.line = line;
    throw InputError(where, "", problem, fix);
  }

  /// Counts one expansion at nesting `depth_` against the bounds above.
  void count_expansion(int line) {
    if (++steps_ > kMaxExpansionSteps)
      fail_at(line, "the script asks for more than " + std::to_string(kMaxExpansionSteps) + " variable expansions",
              "pass the launch line itself, or a script without generated or recursive expansions");
    if (depth_ > kMaxExpansionDepth)
      fail_at(line, "expansions nested more than " + std::to_string(kMaxExpansionDepth) + " levels deep (e.g. ${A:-${B:-...}})",
              "simplify the defaults on this line");
  }

  void note_unresolved(const std::string& what, int line) {
    if (!unresolved_) return;
    const std::string msg = display(file_) + ":" + std::to_string(line) + ": cannot resolve " + what;
    if (std::find(unresolved_->begin(), unresolved_->end(), msg) == unresolved_->end()) unresolved_->push_back(msg);
  }

  /// Value of one expansion; std::nullopt when it cannot be resolved (the text stays as written).
  /// `words` receives the elements of `${NAME[@]}` (with their lines); `def_line` the line that set a variable.
  std::optional<std::string> resolve(const std::string& e, int line, std::vector<Field>* words, int* def_line,
                                     const ValueMarks** marks = nullptr) {
    count_expansion(line);
    if (e.rfind("$((", 0) == 0 && e.size() >= 5) {
      const auto r = eval_shell_arithmetic(e.substr(3, e.size() - 5), vars_);
      if (!r.error.empty())
        fail_at(line, "arithmetic '" + (e.size() > 80 ? e.substr(0, 77) + "..." : e) + "': " + r.error,
                "write the value itself, or an expression whose result fits in 64 bits");
      if (r.value) return std::to_string(*r.value);
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
      return default_value(name, rest, colon);
    }
    if (it != vars_.end() && (rest.empty() || rest == "[@]" || rest == "[*]")) {
      if (def_line && var_lines_.count(name)) *def_line = var_lines_.at(name);
      if (marks && var_marks_.count(name)) *marks = &var_marks_.at(name);
      return it->second;
    }
    note_unresolved("'" + e + "' (" + name + " is not set in the script)", line);
    return std::nullopt;
  }

  /// The default of `${NAME:-default}` / `${NAME-default}` / `${NAME:=default}` (`:=` also assigns it).
  /// `rest` is the text after the name, `colon` whether it starts with ':'.
  std::string default_value(const std::string& name, const std::string& rest, bool colon) {
    const std::string dflt = rest.substr(colon ? 2 : 1);
    // The default may itself hold expansions: lex it as one word.
    auto sts = lex_shell(dflt);
    std::string v;
    ++depth_;
    if (!sts.empty())
      for (const auto& w : sts[0].words)
        for (auto& f : expand(w, true)) v += (v.empty() ? "" : " ") + f.text;
    --depth_;
    if (rest.rfind(":=", 0) == 0) {
      vars_[name] = v;
      var_marks_.erase(name);  // the default's text, not the earlier assignment's
    }
    return v;
  }

  /// Expands one word into fields (unquoted expansions split on blanks; `"${A[@]}"` gives one field per element).
  std::vector<Field> expand(const Word& w, bool no_split = false) {
    std::vector<Field> out;
    if (!w.array_name.empty()) return out;
    // The word's parts that hold something: `"${A[@]}"` is an empty quoted literal (what makes `""` a word)
    // followed by the expansion, and is still a word that is one expansion.
    const auto parts = std::count_if(w.segments.begin(), w.segments.end(),
                                     [](const Segment& s) { return s.expansion || !s.text.empty(); });
    const bool whole = parts == 1;  // the word is this one expansion (or one literal)
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
      const ValueMarks* marks = nullptr;
      auto v = resolve(s.text, w.line, &elems, &def_line, &marks);
      if (!v) {
        cur += s.text;
        have = true;
        continue;
      }
      expanded_bytes_ += v->size();
      if (expanded_bytes_ > kMaxExpandedBytes)
        fail_at(w.line, "the script's expansions produce more than " + std::to_string(kMaxExpandedBytes >> 20) + " MiB of text",
                "pass the launch line itself, or a script without generated or recursive expansions");
      if (!elems.empty() && (s.quoted || !no_split) && whole) {
        for (const auto& e : elems) out.push_back(e);
        return out;
      }
      if (s.quoted || no_split) {
        cur += *v;
        have = true;
        continue;
      }
      std::vector<std::string> pieces;
      std::vector<size_t> piece_starts;  // offset of each piece in *v
      for (size_t i = 0; i < v->size();) {
        if (std::isspace(static_cast<unsigned char>((*v)[i]))) {
          ++i;
          continue;
        }
        size_t j = i;
        while (j < v->size() && !std::isspace(static_cast<unsigned char>((*v)[j]))) ++j;
        pieces.push_back(v->substr(i, j - i));
        piece_starts.push_back(i);
        i = j;
      }
      const bool lead_blank = !v->empty() && std::isspace(static_cast<unsigned char>(v->front()));
      const bool trail_blank = !v->empty() && std::isspace(static_cast<unsigned char>(v->back()));
      // A word that comes whole from a variable gets the line that set the variable (the flag's own line): in a
      // quoted value over several lines, the line the piece was written on.
      const int piece_line = whole && def_line > 0 ? def_line : w.line;
      size_t next_mark = 0;  // pieces and marks both ascend: one pass over the marks (linear in hostile input)
      int marked_line = piece_line;
      auto line_of = [&](size_t i) {
        if (!(whole && def_line > 0 && marks != nullptr)) return piece_line;
        for (; next_mark < marks->size() && (*marks)[next_mark].first <= piece_starts[i]; ++next_mark)
          marked_line = (*marks)[next_mark].second;
        return marked_line;
      };
      auto column_of = [&](int l) { return l == w.line ? w.column : 0; };
      int last_line = piece_line;
      for (size_t i = 0; i < pieces.size(); ++i) {
        if (i > 0 || lead_blank) {
          if (have) out.push_back({cur, last_line, column_of(last_line)});
          cur.clear();
          have = false;
        }
        cur += pieces[i];
        last_line = line_of(i);
        have = true;
      }
      const int piece_column = column_of(last_line);
      if (whole && have) {
        out.push_back({cur, last_line, piece_column});
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
      const size_t name_at = flag.find_first_not_of('-');  // npos for `--=value`: an option without a name
      a.name = name_at == std::string::npos ? std::string() : flag.substr(name_at);
      std::replace(a.name.begin(), a.name.end(), '-', '_');
      a.line = f[i].line;
      a.column = f[i].column;
      a.from_launcher = launcher;
      out.push_back(std::move(a));
    }
    return out;
  }

  std::optional<std::vector<MegatronArg>> training_command(const std::vector<Field>& f, Candidate& what) {
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
    // An MPI launcher (mpirun / mpiexec -np N, srun -n N -N nodes) starting one process per GPU directly: its counts,
    // read as "mpirun:np", "srun:ntasks", ... (their options end at the python interpreter).
    size_t launcher = f.size(), launcher_end = script;
    std::string mpi;  // "mpirun" or "srun" when such a launcher starts the script itself
    for (size_t i = 0; i < script; ++i) {
      const std::string base = std::filesystem::path(f[i].text).filename().string();
      if (base == "torchrun") launcher = i + 1, mpi.clear();
      if (base == "mpirun" || base == "mpiexec" || base == "srun") {
        launcher = i + 1;
        mpi = base == "srun" ? "srun" : "mpirun";
      }
      if (!mpi.empty() && i >= launcher && base.rfind("python", 0) == 0 && launcher_end == script) launcher_end = i;
      if (f[i].text == "-m" && i + 1 < script &&
          (f[i + 1].text == "torch.distributed.run" || f[i + 1].text == "torch.distributed.launch"))
        launcher = i + 2, mpi.clear(), launcher_end = script;
    }
    what.script = std::filesystem::path(f[script].text).filename().string();
    what.pretrain = what.script.rfind("pretrain", 0) == 0;
    what.launched = launcher < script;
    std::vector<std::string> stray;
    std::vector<MegatronArg> out;
    if (launcher < script) out = options(f, launcher, std::min(launcher_end, script), true, stray);
    if (!mpi.empty())
      for (MegatronArg& a : out) a.name = mpi + ":" + a.name;  // never a torchrun or Megatron name
    if (mpi == "srun") inherit_allocation(out);
    auto main = options(f, script + 1, f.size(), false, stray);
    out.insert(out.end(), main.begin(), main.end());
    return out;
  }

  /// An srun that gives neither its node count nor its tasks per node takes them from the job's allocation (the
  /// #SBATCH lines): they are added to its options as "srun:nodes" / "srun:ntasks_per_node", flagged as the
  /// directive that set them.
  void inherit_allocation(std::vector<MegatronArg>& out) const {
    auto has = [&](std::initializer_list<const char*> names) {
      return std::any_of(out.begin(), out.end(), [&](const MegatronArg& a) {
        return std::find_if(names.begin(), names.end(), [&](const char* n) { return a.name == n; }) != names.end();
      });
    };
    if (has({"srun:N", "srun:nodes", "srun:n", "srun:ntasks", "srun:ntasks_per_node"})) return;
    for (const SbatchSetting& d : allocation_) {
      const char* name = d.variable == "SLURM_NNODES"            ? "srun:nodes"
                         : d.variable == "SLURM_NTASKS_PER_NODE" ? "srun:ntasks_per_node"
                                                                 : nullptr;
      if (name == nullptr) continue;
      MegatronArg a;
      a.name = name;
      a.flag = d.directive.substr(0, d.directive.rfind(' '));  // "#SBATCH --nodes"
      a.values = {d.value};
      a.line = d.line;
      a.from_launcher = true;
      out.push_back(std::move(a));
    }
  }

  std::vector<SbatchSetting> allocation_;
  std::string file_;
  std::vector<std::string>* unresolved_;
  std::map<std::string, std::string> vars_;
  std::map<std::string, std::vector<Field>> arrays_;
  std::map<std::string, int> var_lines_;
  std::map<std::string, ValueMarks> var_marks_;  ///< value_marks of each assignment
  int depth_ = 0;            ///< defaults being expanded inside defaults
  int64_t steps_ = 0;        ///< expansions resolved so far
  size_t expanded_bytes_ = 0;  ///< bytes of fields produced so far
};

}  // namespace

std::vector<SbatchSetting> sbatch_settings(const std::string& text) {
  std::vector<SbatchSetting> out;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::istringstream words(line);
    std::string word;
    if (!(words >> word) || word != "#SBATCH") continue;
    std::vector<std::string> tokens;
    while (words >> word && word[0] != '#') tokens.push_back(word);  // a second '#' starts a comment
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string opt = tokens[i], value;
      if (const auto eq = opt.find('='); eq != std::string::npos) {
        value = opt.substr(eq + 1);
        opt.resize(eq);
      } else if (opt.size() > 2 && opt[0] == '-' && opt[1] != '-') {  // -N4
        value = opt.substr(2);
        opt.resize(2);
      } else if (i + 1 < tokens.size()) {
        value = tokens[++i];
      }
      if (opt == "--gres") {  // "gpu:8,nvme:1": the gpu entry's count
        std::string gpu;
        for (std::istringstream items(value); std::getline(items, gpu, ',');)
          if (gpu.rfind("gpu", 0) == 0) break;
        value = gpu.rfind("gpu", 0) == 0 ? gpu : "";
      }
      const std::string digits = value.substr(value.rfind(':') == std::string::npos ? 0 : value.rfind(':') + 1);
      if (!interop::all_digits(digits) || digits.size() > interop::kMaxCountDigits) continue;  // a node range "2-4", a memory size: not a count hcpsim reads
      if (opt == "-N" || opt == "--nodes")
        out.push_back({"SLURM_NNODES", digits, number, "#SBATCH " + opt + " " + value});
      else if (opt == "--ntasks-per-node")
        out.push_back({"SLURM_NTASKS_PER_NODE", digits, number, "#SBATCH " + opt + " " + value});
      else if (opt == "--gpus-per-node" || (opt == "--gres" && value.rfind("gpu", 0) == 0))
        out.push_back({"SLURM_GPUS_ON_NODE", digits, number, "#SBATCH " + opt + " " + value});
    }
  }
  return out;
}

std::vector<MegatronArg> split_megatron_command_line(const std::string& text, const std::string& display_name,
                                                     std::vector<std::string>* unresolved) {
  const auto statements = lex_shell(text);
  ShellInterpreter interp(display_name, unresolved);
  const std::vector<SbatchSetting> allocation = sbatch_settings(text);
  interp.set_allocation(allocation);
  for (const SbatchSetting& d : allocation) {
    const std::string why = d.directive + " at line " + std::to_string(d.line);
    // Only the variables the script names (a note per variable it uses, none for the others).
    for (const char* v : {d.variable.c_str(), d.variable == "SLURM_NNODES" ? "SLURM_JOB_NUM_NODES" : ""})
      if (*v != '\0' && text.find(v) != std::string::npos) interp.predefine(v, d.value, d.line, why);
  }
  return interp.run(statements);
}

}  // namespace hcpsim
