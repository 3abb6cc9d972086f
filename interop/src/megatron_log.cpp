#include "hcpsim/interop/megatron_log.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "hcpsim/config/cluster_spec.hpp"

namespace hcpsim {
namespace {

std::string display(const std::string& name) { return name == "-" ? "<stdin>" : name; }

// Source: assumption: a text log holds only tabs, CR/LF, form feeds and ANSI colour escapes among the control
// bytes; more than 1% other control bytes (or any NUL) means a binary file.
constexpr double kMaxControlByteFraction = 0.01;
// Bytes inspected for the binary test: enough to see past any text header of a binary format.
constexpr size_t kBinaryProbeBytes = 65536;

std::string fmt1(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// The integer spelt by the digits line[p, e) (at least one digit). A number beyond int64 is a corrupt log, not a
/// crash: InputError naming the file, line and `what`.
int64_t digits_value(const std::string& line, size_t p, size_t e, const SourceLoc& where, const std::string& what) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(line.data() + p, line.data() + e, v);
  if (ec != std::errc() || end != line.data() + e)
    throw InputError(where, what, "'" + line.substr(p, std::min<size_t>(e - p, 40)) + "' is not a 64-bit integer",
                     "pass the log as Megatron printed it (this number is corrupt)");
  return v;
}

std::optional<int64_t> field(const std::string& line, const std::string& key, const SourceLoc& where) {
  // The key must not be the tail of a longer key ("encoder-tensor-model-parallel size").
  size_t pos = 0;
  while ((pos = line.find(key + ": ", pos)) != std::string::npos) {
    if (pos == 0 || line[pos - 1] != '-') {
      size_t p = pos + key.size() + 2;
      size_t e = p;
      while (e < line.size() && std::isdigit(static_cast<unsigned char>(line[e]))) ++e;
      if (e > p) return digits_value(line, p, e, where, key);
      return std::nullopt;
    }
    pos += key.size();
  }
  return std::nullopt;
}

std::optional<WorldSizeReport> world_line(const std::string& line, const SourceLoc& where) {
  const auto at = line.find("using world size: ");
  if (at == std::string::npos) return std::nullopt;
  const std::string s = line.substr(at);
  WorldSizeReport r;
  r.line = where.line;
  auto w = field(s, "using world size", where);
  auto d = field(s, "data-parallel size", where);
  if (!w || !d) return std::nullopt;
  r.world_size = *w;
  r.data_parallel_size = *d;
  r.context_parallel_size = field(s, "context-parallel size", where);
  if (auto t = field(s, "tensor-model-parallel size", where)) r.tensor_model_parallel_size = *t;
  if (auto p = field(s, "pipeline-model-parallel size", where)) r.pipeline_model_parallel_size = *p;
  const std::string hkey = "hierarchical context-parallel sizes: ";
  const auto h = s.find(hkey);
  if (h != std::string::npos) {
    r.reports_hierarchical = true;
    const std::string rest = s.substr(h + hkey.size());
    if (!rest.empty() && rest[0] == '[') {
      const auto close = rest.find(']');
      if (close != std::string::npos) {
        std::vector<int64_t> sizes;
        std::stringstream in(rest.substr(1, close - 1));
        std::string item;
        while (std::getline(in, item, ',')) {
          try {
            sizes.push_back(std::stoll(item));
          } catch (const std::exception&) {
            sizes.clear();
            break;
          }
        }
        if (!sizes.empty()) r.hierarchical_sizes = sizes;
      }
    }
  }
  return r;
}

/// The characters of the regex class \s: space, tab, LF, VT, FF, CR.
bool is_regex_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/// `  name ....... value` (dots may be absent for names of 48+ characters): the first name that starts the line
/// or follows a whitespace character and is followed by one space, then the dots, an optional space and the value
/// (the rest of the line, which must hold no CR). This is what the ECMAScript regex
/// `(?:^|\s)([A-Za-z_][A-Za-z0-9_]*) (\.*) ?(.*)$` finds with regex_search, scanned by hand: libstdc++'s
/// std::regex recurses once per character and overflowed the stack on a line of 200,000 characters.
bool argument_line(const std::string& line, int number, MegatronArg& out) {
  const size_t n = line.size();
  const size_t last_cr = line.rfind('\r');
  auto name_start = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  auto name_char = [&](char c) { return name_start(c) || (c >= '0' && c <= '9'); };
  for (size_t s = 0; s < n; ++s) {
    if (s > 0 && !is_regex_space(line[s - 1])) continue;
    if (!name_start(line[s])) continue;
    size_t e = s + 1;
    while (e < n && name_char(line[e])) ++e;
    if (e >= n || line[e] != ' ') continue;
    size_t d = e + 1;
    while (d < n && line[d] == '.') ++d;
    size_t v = d;
    if (v < n && line[v] == ' ') ++v;
    // `.` matches neither CR nor LF (getline removed the LF), so a CR after the name fails this start.
    if (last_cr != std::string::npos && last_cr > e) continue;
    if (d == e + 1 && v == n) return false;  // neither dots nor a value
    out.name = line.substr(s, e - s);
    out.flag = out.name;
    std::string value = line.substr(v);
    while (!value.empty() && value.back() == ' ') value.pop_back();
    out.values = {value};
    out.line = number;
    out.column = static_cast<int>(s) + 1;
    return true;
  }
  return false;
}

/// The decimal number at the start of `text` (blanks skipped); std::nullopt for none, for text that spells NaN or
/// Inf (std::stod reads those) and for a value outside double's range, so no report holds a non-finite value.
std::optional<double> finite_number(const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == 0 || !std::isfinite(v)) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<ThroughputReport> throughput_line(const std::string& line, const SourceLoc& where) {
  const std::string key = "throughput per GPU (TFLOP/s/GPU): ";
  const auto at = line.find(key);
  if (at == std::string::npos) return std::nullopt;
  ThroughputReport r;
  r.line = where.line;
  const auto tflops = finite_number(line.substr(at + key.size()));
  if (!tflops) return std::nullopt;
  r.tflops_per_gpu = *tflops;
  // Megatron's training_log: "elapsed time per iteration (ms): 7450.2 | ... | global batch size:    64 |".
  auto number_after = [&](const std::string& k) -> std::optional<double> {
    const auto pos = line.find(k);
    if (pos == std::string::npos) return std::nullopt;
    const auto v = finite_number(line.substr(pos + k.size()));
    if (!v || !(*v > 0)) return std::nullopt;
    return v;
  };
  r.elapsed_ms = number_after("elapsed time per iteration (ms): ");
  // A batch size beyond 2^53 is no count a run prints; converting it to int64 could overflow.
  if (const auto g = number_after("global batch size: "); g && *g <= 9007199254740992.0)
    r.global_batch_size = static_cast<int64_t>(*g);
  const auto it = line.find("iteration ");
  if (it != std::string::npos) {
    size_t p = it + 10;
    while (p < line.size() && line[p] == ' ') ++p;
    size_t e = p;
    while (e < line.size() && std::isdigit(static_cast<unsigned char>(line[e]))) ++e;
    if (e > p) r.iteration = digits_value(line, p, e, where, "iteration");
  }
  return r;
}

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// Digits read as an int64_t: at most 18, so std::stoll cannot overflow.
constexpr size_t kMaxCountDigits = 18;

/// `text` as a count when it is only decimal digits (blanks around ignored).
std::optional<int64_t> count_text(const std::string& text) {
  const std::string t = trimmed(text);
  if (t.empty() || t.size() > kMaxCountDigits ||
      !std::all_of(t.begin(), t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }))
    return std::nullopt;
  return std::stoll(t);
}

/// The N of training_log's `iteration N/ M` (Megatron pads both numbers with blanks; NeMo 2 prints
/// `iteration N/M`); std::nullopt on every other line.
std::optional<int64_t> training_iteration(const std::string& line) {
  for (size_t pos = line.find("iteration "); pos != std::string::npos; pos = line.find("iteration ", pos + 1)) {
    size_t p = pos + 10;
    while (p < line.size() && line[p] == ' ') ++p;
    size_t e = p;
    while (e < line.size() && std::isdigit(static_cast<unsigned char>(line[e]))) ++e;
    size_t slash = e;
    while (slash < line.size() && line[slash] == ' ') ++slash;
    if (e > p && e - p <= kMaxCountDigits && slash < line.size() && line[slash] == '/')
      return std::stoll(line.substr(p, e - p));
  }
  return std::nullopt;
}

/// The `name: value |` fields of an iteration line that report NaN or Inf; std::nullopt when none does.
std::optional<NanReport> nan_line(const std::string& line, int number, int64_t iteration) {
  NanReport r;
  r.line = number;
  r.iteration = iteration;
  std::stringstream in(line);
  std::string item;
  while (std::getline(in, item, '|')) {
    const auto colon = item.find(": ");
    if (colon == std::string::npos) continue;
    std::string name = trimmed(item.substr(0, colon));
    const std::string value = trimmed(item.substr(colon + 2));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const bool loss = name.size() >= 4 && name.compare(name.size() - 4, 4, "loss") == 0;  // lm loss, z_loss
    if (name == "number of nan iterations") {
      r.nan_iterations = count_text(value).value_or(0);
    } else if ((loss || name == "grad norm") && is_non_finite_text(value)) {
      r.non_finite.push_back(trimmed(item.substr(0, colon)) + ": " + value);
    }
  }
  if (r.nan_iterations == 0 && r.non_finite.empty()) return std::nullopt;
  return r;
}

/// NeMo / PyTorch Lightning's progress bar ("Epoch 0: 2%| | 2/100 [00:05<04:10, 2.55s/it, v_num=0,
/// reduced_train_loss=nan, global_step=1.000]"): its `name=value` fields inside the brackets whose name ends in
/// "loss" (or is grad_norm) printed NaN or Inf. The iteration is global_step + 1 when printed (Lightning counts from
/// 0), else the N of "N/M". std::nullopt on other lines.
std::optional<NanReport> nan_progress_bar_line(const std::string& line, int number) {
  const auto open = line.rfind(" ["), close = line.rfind(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  NanReport r;
  r.line = number;
  std::stringstream in(line.substr(open + 2, close - open - 2));
  std::string item;
  std::optional<int64_t> step;
  while (std::getline(in, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = trimmed(item.substr(0, eq)), value = trimmed(item.substr(eq + 1));
    if (name == "global_step") {
      try {
        step = static_cast<int64_t>(std::stod(value)) + 1;
      } catch (const std::exception&) {
      }
    }
    const bool loss = name.size() >= 4 && name.compare(name.size() - 4, 4, "loss") == 0;
    if ((loss || name == "grad_norm") && is_non_finite_text(value)) r.non_finite.push_back(name + "=" + value);
  }
  if (r.non_finite.empty()) return std::nullopt;
  if (step) {
    r.iteration = *step;
  } else {  // the N of the bar's "N/M" just before the brackets
    size_t e = open;
    while (e > 0 && line[e - 1] == ' ') --e;
    const auto slash = line.rfind('/', e);
    size_t b = slash == std::string::npos ? 0 : slash;
    while (b > 0 && std::isdigit(static_cast<unsigned char>(line[b - 1]))) --b;
    if (slash != std::string::npos && b < slash && slash - b <= kMaxCountDigits)
      r.iteration = std::stoll(line.substr(b, slash - b));
  }
  return r;
}

void check_text(const std::string& bytes, const std::string& file) {
  SourceLoc where;
  where.file = display(file);
  if (bytes.find_first_not_of(" \t\r\n") == std::string::npos)
    throw InputError(where, "", bytes.empty() ? "empty file" : "the file holds only blank lines",
                     "pass the text log of a Megatron training run (stdout/stderr of rank 0)");
  const size_t n = std::min(bytes.size(), kBinaryProbeBytes);
  size_t control = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == 0)
      throw InputError(where, "", "binary file (NUL byte at offset " + std::to_string(i) + "), not a text log",
                       "pass the text log of a Megatron training run (stdout/stderr of rank 0), not a checkpoint, "
                       "trace or compressed file");
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != 0x1b) ++control;
  }
  if (static_cast<double>(control) > kMaxControlByteFraction * static_cast<double>(n))
    throw InputError(where, "", "binary file (" + std::to_string(control) + " control bytes in the first " +
                                    std::to_string(n) + "), not a text log",
                     "pass the text log of a Megatron training run (stdout/stderr of rank 0)");
}

const MegatronArg* find_arg(const MegatronLog& log, const std::string& name) {
  const MegatronArg* found = nullptr;
  for (const auto& a : log.arguments)
    if (a.name == name) found = &a;
  return found;
}

/// The context-parallel size the run used and where the log says so: the world-size line (what ran), else the
/// interpreted arguments, else the raw context_parallel_size argument. std::nullopt when the log gives none.
std::optional<std::pair<int64_t, std::string>> log_context_parallel_size(const MegatronLog& log,
                                                                         const std::optional<MegatronConfig>& args) {
  const std::string file = display(log.path);
  if (log.world && log.world->context_parallel_size)
    return std::make_pair(*log.world->context_parallel_size,
                          "the world-size line " + file + ":" + std::to_string(log.world->line));
  const MegatronArg* a = find_arg(log, "context_parallel_size");
  const std::string where = a ? " " + file + ":" + std::to_string(a->line) : std::string();
  if (args) return std::make_pair(args->context_parallel_size, "the arguments" + where);
  if (a && !a->values.empty())
    if (const auto v = count_text(a->values.front())) return std::make_pair(*v, "the arguments" + where);
  return std::nullopt;
}

std::string plural(int64_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

MegatronLog parse_megatron_log(const std::string& bytes, const std::string& display_name, int first_line) {
  check_text(bytes, display_name);
  MegatronLog log;
  log.path = display_name;
  std::istringstream in(bytes);
  std::string line;
  int number = first_line - 1;
  bool in_args = false;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (in_args) {
      if (line.find("-- end of arguments --") != std::string::npos) {
        in_args = false;
        log.arguments_end_line = number;
        continue;
      }
      MegatronArg a;
      if (argument_line(line, number, a)) log.arguments.push_back(std::move(a));
      continue;
    }
    if (log.arguments_begin_line == 0 && line.find("-- arguments --") != std::string::npos) {
      in_args = true;
      log.arguments_begin_line = number;
      continue;
    }
    SourceLoc at_line;
    at_line.file = display(display_name);
    at_line.line = number;
    if (!log.world) log.world = world_line(line, at_line);
    if (auto t = throughput_line(line, at_line)) add_throughput_report(log, *t);
    if (const auto it = training_iteration(line)) {
      ++log.iteration_lines;
      if (auto n = nan_line(line, number, *it)) log.nan_reports.push_back(std::move(*n));
    } else if (line.find("loss=") != std::string::npos && line.find(" [") != std::string::npos) {
      ++log.iteration_lines;  // a progress-bar line reports a loss like an iteration line
      if (auto n = nan_progress_bar_line(line, number)) log.nan_reports.push_back(std::move(*n));
    }
    if (!log.padded_vocab_size) {
      const auto at = line.find("padded vocab (size: ");
      if (at != std::string::npos) {
        try {
          log.padded_vocab_size = std::stoll(line.substr(at + 20));
        } catch (const std::exception&) {
        }
      }
    }
    if (!log.gpu_name) {
      if (auto g = gpu_named_in_line(line)) {
        log.gpu_name = g;
        log.gpu_line = number;
      }
    }
  }
  SourceLoc where;
  where.file = display(display_name);
  if (in_args) {
    where.line = log.arguments_begin_line;
    where.column = 1;
    throw InputError(where, "", "truncated log: the arguments block that starts here has no "
                                "'-------------------- end of arguments ---------------------' line",
                     "pass the whole log (the run may have been cut off, or the file copied while being written)");
  }
  if (log.arguments_begin_line == 0 && !log.world)
    throw InputError(where, "",
                     "truncated or not a Megatron training log: no arguments block "
                     "('------------------------ arguments ------------------------') and no "
                     "'using world size: ...' line",
                     "pass the rank-0 log of a Megatron-LM run from its start (arguments.py prints both "
                     "before training)");
  return log;
}

std::vector<LogFinding> check_hierarchical_cp(const MegatronLog& log, const std::optional<MegatronConfig>& args) {
  std::vector<LogFinding> out;
  const std::string file = display(log.path);
  const auto& w = log.world;
  auto where = [&](int line) { return file + ":" + std::to_string(line); };
  if (args) {
    const bool a2a_p2p =
        std::find(args->cp_comm_type.begin(), args->cp_comm_type.end(), "a2a+p2p") != args->cp_comm_type.end();
    const MegatronArg* type_arg = find_arg(log, "cp_comm_type");
    const int type_line = type_arg ? type_arg->line : 0;
    if (a2a_p2p && !args->hierarchical_context_parallel_sizes) {
      std::string evidence;
      if (w && w->reports_hierarchical && !w->hierarchical_sizes)
        evidence = "; the world-size line (" + where(w->line) + ") reports hierarchical context-parallel sizes: None";
      out.push_back({type_line,
                     "cp_comm_type a2a+p2p is configured without hierarchical_context_parallel_sizes: Megatron builds "
                     "no hierarchical groups, TE receives cp_group=None and training silently runs WITHOUT context "
                     "parallelism (each rank attends only to its own chunks)" + evidence +
                         "; fix: set --hierarchical-context-parallel-sizes A P with A*P = context_parallel_size " +
                         std::to_string(args->context_parallel_size)});
    }
    // The world-size line names another CP size (> 1) than the arguments: a finding of its own (below), which the
    // hierarchical check does not repeat.
    const bool other_cp = w && w->context_parallel_size && *w->context_parallel_size > 1 &&
                          *w->context_parallel_size != args->context_parallel_size;
    if (a2a_p2p && args->hierarchical_context_parallel_sizes && w) {
      const MegatronArg* sizes_arg = find_arg(log, "hierarchical_context_parallel_sizes");
      const std::string configured = list_text(*args->hierarchical_context_parallel_sizes) + " (" +
                                     where(sizes_arg ? sizes_arg->line : type_line) + ")";
      std::string missing;
      const bool cp_one = w->context_parallel_size && *w->context_parallel_size == 1;
      const std::string cp_text = "context-parallel size: 1 (the arguments: " +
                                  std::to_string(args->context_parallel_size) + ")";
      if (w->reports_hierarchical && !w->hierarchical_sizes)
        missing = "hierarchical context-parallel sizes: None" + (cp_one ? " and " + cp_text : std::string());
      else if (cp_one) missing = cp_text;
      else if (!other_cp && w->hierarchical_sizes &&
               *w->hierarchical_sizes != *args->hierarchical_context_parallel_sizes)
        missing = "hierarchical context-parallel sizes: " + list_text(*w->hierarchical_sizes);
      if (!missing.empty())
        out.push_back({w->line, "hierarchical context parallelism is configured (cp_comm_type a2a+p2p, "
                                "hierarchical_context_parallel_sizes " + configured +
                                    ") but the world-size line reports " + missing +
                                    ": the hierarchical groups were not built as configured; fix: check that the "
                                    "launch passes --hierarchical-context-parallel-sizes to this Megatron version"});
    }
    if (w && w->context_parallel_size && args->context_parallel_size > 1 && *w->context_parallel_size == 1 &&
        !a2a_p2p) {
      out.push_back({w->line, "context_parallel_size " + std::to_string(args->context_parallel_size) +
                                  " in the arguments but the world-size line reports context-parallel size: 1"});
    } else if (other_cp) {
      out.push_back({w->line, "context_parallel_size " + std::to_string(args->context_parallel_size) +
                                  " in the arguments but the world-size line reports context-parallel size: " +
                                  std::to_string(*w->context_parallel_size) +
                                  ": the two describe different runs (a log of several runs, or an edited one); "
                                  "fix: check the log against the launch that wrote it"});
    }
  }
  return out;
}

std::vector<LogFinding> check_throughput_peak(const MegatronLog& log, const GpuPeak& peak, bool fp8) {
  std::vector<LogFinding> out;
  const double limit = held_peak_tflops(peak, fp8);
  fp8 = fp8 && peak.fp8_tflops > 0;  // what the message names
  const ThroughputReport* first = nullptr;
  const ThroughputReport* max = nullptr;
  size_t count = 0;
  for (const auto& t : log.throughput) {
    if (t.tflops_per_gpu <= limit) continue;
    ++count;
    if (!first) first = &t;
    if (!max || t.tflops_per_gpu > max->tflops_per_gpu) max = &t;
  }
  if (!first) return out;
  std::string msg = "reported throughput per GPU " + fmt1(first->tflops_per_gpu) + " TFLOP/s (iteration " +
                    std::to_string(first->iteration) + ") exceeds the dense " + (fp8 ? "FP8" : "bf16") +
                    " peak of the GPU, " + fmt1(limit) + " TFLOP/s (" + peak.source + ")";
  msg += "; " + std::to_string(count) + " of " + std::to_string(log.throughput.size()) +
         " reporting iterations are above it, max " + fmt1(max->tflops_per_gpu) + " at " + display(log.path) + ":" +
         std::to_string(max->line);
  msg += ". Megatron counts the FLOPs of the configured model, so the GPUs did less work than configured "
         "(e.g. attention without context parallelism) or the FLOP count is wrong";
  out.push_back({first->line, msg});
  return out;
}

std::vector<LogFinding> check_throughput_vs_model(const MegatronLog& log,
                                                  std::optional<double> predicted_tflops_per_gpu, double factor) {
  std::vector<LogFinding> out;
  if (!predicted_tflops_per_gpu || *predicted_tflops_per_gpu <= 0) return out;
  const double limit = factor * *predicted_tflops_per_gpu;
  size_t count = 0;
  const ThroughputReport* first = nullptr;
  for (const auto& t : log.throughput) {
    if (t.tflops_per_gpu <= limit) continue;
    ++count;
    if (!first) first = &t;
  }
  if (!first) return out;
  char factor_text[32];
  std::snprintf(factor_text, sizeof factor_text, "%.2g", factor);
  out.push_back({first->line, "reported throughput per GPU " + fmt1(first->tflops_per_gpu) + " TFLOP/s (iteration " +
                                  std::to_string(first->iteration) + ") is more than " + factor_text +
                                  "x the whole-step model's " + fmt1(*predicted_tflops_per_gpu) + " TFLOP/s (" +
                                  std::to_string(count) + " of " + std::to_string(log.throughput.size()) +
                                  " reporting iterations); the run did less work than configured"});
  return out;
}

std::vector<LogFinding> check_throughput_below_model(const MegatronLog& log,
                                                     std::optional<double> predicted_tflops_per_gpu,
                                                     double low_factor) {
  std::vector<LogFinding> out;
  if (!predicted_tflops_per_gpu || *predicted_tflops_per_gpu <= 0 || log.throughput.empty()) return out;
  const size_t skip = log.throughput.size() > 1 ? 1 : 0;  // the first report includes the warm-up
  std::vector<double> v;
  for (size_t i = skip; i < log.throughput.size(); ++i) v.push_back(log.throughput[i].tflops_per_gpu);
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  const double limit = low_factor * *predicted_tflops_per_gpu;
  if (median >= limit) return out;
  const ThroughputReport* first = nullptr;
  for (size_t i = skip; i < log.throughput.size() && !first; ++i)
    if (log.throughput[i].tflops_per_gpu < limit) first = &log.throughput[i];
  if (!first) return out;  // unreachable with finite reports (parse_megatron_log refuses others)
  char factor_text[32];
  std::snprintf(factor_text, sizeof factor_text, "%.2g", low_factor);
  const double percent = 100.0 * median / *predicted_tflops_per_gpu;
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.0f%%", percent);
  out.push_back({first->line, "median reported throughput per GPU " + fmt1(median) + " TFLOP/s (" +
                                  std::to_string(n) + " reporting iterations" + (skip ? ", the first left out" : "") +
                                  ") is " + pct + " of the whole-step model's " + fmt1(*predicted_tflops_per_gpu) +
                                  " TFLOP/s, below " + factor_text +
                                  "x: a slow node or link, or a configuration other than the one modelled"});
  return out;
}

bool is_non_finite_text(const std::string& text) {
  std::string t = trimmed(text);
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) t.erase(0, 1);
  // C's printf may print a NaN's payload: "nan(0x8000000000000)".
  return t == "nan" || t == "inf" || t == "infinity" || (t.rfind("nan(", 0) == 0 && t.back() == ')');
}

std::vector<LogFinding> check_nan_iterations(const MegatronLog& log, const std::optional<MegatronConfig>& args) {
  std::vector<LogFinding> out;
  if (log.nan_reports.empty()) return out;
  int64_t counted = 0;
  int64_t counting_lines = 0;
  int64_t non_finite_lines = 0;
  for (const auto& r : log.nan_reports) {
    counted += r.nan_iterations;
    counting_lines += r.nan_iterations > 0 ? 1 : 0;
    non_finite_lines += r.non_finite.empty() ? 0 : 1;
  }
  const NanReport& first = log.nan_reports.front();
  std::string evidence;
  if (first.nan_iterations > 0) evidence = "number of nan iterations: " + std::to_string(first.nan_iterations);
  for (const auto& f : first.non_finite) evidence += (evidence.empty() ? "" : ", ") + f;
  const std::string of_lines = " of " + std::to_string(log.iteration_lines) + " logged iteration lines";
  std::string msg = "NaN/Inf in training: ";
  if (counted > 0)
    msg += "'number of nan iterations' counts " + plural(counted, "iteration") + " on " +
           std::to_string(counting_lines) + of_lines;
  if (non_finite_lines > 0)
    msg += std::string(counted > 0 ? "; " : "") + std::to_string(non_finite_lines) + of_lines +
           " show a non-finite loss or grad norm";
  msg += "; first reported at iteration " + std::to_string(first.iteration) + " (" + evidence + ")";
  const auto cp = log_context_parallel_size(log, args);
  if (cp && cp->first > 1) {
    msg += ", with context parallelism (context-parallel size " + std::to_string(cp->first) + ", from " +
           cp->second +
           "). Known CP causes: a CP rank whose tokens are all padding or loss-masked gives 0/0 in the attention "
           "softmax and the loss (NVIDIA/Megatron-LM#1764, NVIDIA-NeMo/Megatron-Bridge#2914); a THD packed "
           "sequence whose half on a CP rank is all padding gives NaN gradients in TE's fused attention backward "
           "(NVIDIA/TransformerEngine#2186); fix: check that no CP rank's tokens are all padding or loss-masked "
           "(if the run packs sequences: cu_seqlens_padded pads each to a multiple of 2*CP, and a TE release with "
           "the fix of TransformerEngine#2186), and check the CP attention with `hcpsim verify` on a scenario of "
           "this configuration (packed: qkv_format thd with the run's packed_sequence_lengths)";
  } else {
    msg += ", not CP-specific (" +
           (cp ? "context-parallel size " + std::to_string(cp->first) + ", from " + cp->second
               : std::string("the log reports no context-parallel size")) +
           "): look for the usual causes (learning rate, data, fp16 loss scale, a faulty GPU)";
  }
  out.push_back({first.line, msg});
  return out;
}

}  // namespace hcpsim
