#include "admission.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <thread>

#include <fmt/core.h>

#include "app_common.hpp"
#include "progress.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/head_selection.hpp"
#include "hcpsim/oracles/oracle_cost.hpp"
#include "hcpsim/sim/simulation_cost.hpp"

namespace hcpsim::app {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

/// "about 1.20 TiB (3.4e+09 schedule ops, 1.4e+10 events, about 2.1 h on one core)".
std::string cost_text(double bytes, double ops, double events, double seconds) {
  std::string t = "about " + human_bytes(bytes);
  if (ops > 0) t += fmt::format(" ({:.2g} schedule ops, {:.2g} events", ops, events);
  if (seconds > 0) t += fmt::format("{}about {:.2g} s", ops > 0 ? ", " : " (", seconds);
  if (ops > 0 || seconds > 0) t += ")";
  return t;
}

std::string limit_text(uint64_t limit) {
  return fmt::format("--max-memory is {} ({} by default: 80% of this machine's {})",
                     human_bytes(static_cast<double>(limit)), human_bytes(static_cast<double>(default_max_memory())),
                     human_bytes(static_cast<double>(physical_memory_bytes())));
}

}  // namespace

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

uint64_t default_max_memory() {
  const uint64_t phys = physical_memory_bytes();
  return phys == 0 ? static_cast<uint64_t>(16 * kGiB) : phys / 5 * 4;
}

uint64_t parse_memory_size(const std::string& text) {
  auto fail = [&](const std::string& why) -> uint64_t {
    throw InputError(SourceLoc{}, "--max-memory", "'" + text + "' " + why,
                     "give a size such as --max-memory 4G (suffixes K, M, G, T: powers of 1024; none: bytes)");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) != 0 || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i);
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1 || number == ".")
    return fail("is not a size");
  std::string suffix = text.substr(i);
  for (char& ch : suffix) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double scale = 1;
  if (!suffix.empty() && suffix != "B") {
    const std::string units = "KMGT";
    const size_t u = units.find(suffix[0]);
    const std::string rest = suffix.substr(1);
    if (u == std::string::npos || !(rest.empty() || rest == "B" || rest == "IB"))
      return fail("has an unknown unit '" + text.substr(i) + "'");
    scale = std::pow(1024.0, static_cast<double>(u + 1));
  }
  const double bytes = std::stod(number) * scale;
  if (!(bytes >= 1)) return fail("must be at least one byte");
  if (bytes >= 0x1p63) return fail("is too large");
  return static_cast<uint64_t>(bytes);
}

void add_max_memory_option(CLI::App* cmd, std::string& text) {
  cmd->add_option("--max-memory", text,
                  "refuse runs estimated to need more memory than SIZE (e.g. 4G; K, M, G, T suffixes; default 80% of "
                  "physical memory)");
}

void add_quiet_flag(CLI::App* cmd) {
  cmd->add_flag_callback("--quiet", [] { set_progress_quiet(true); },
                         "no estimate or progress lines on stderr (errors and warnings still appear)");
}

uint64_t max_memory_limit(const std::string& text) {
  return text.empty() ? default_max_memory() : parse_memory_size(text);
}

int max_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 256 : std::max(static_cast<int>(n), 2);
}

int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void check_thread_count(int threads, const char* option) {
  if (threads < 1)
    throw InputError(SourceLoc{}, option, "must be at least 1", fmt::format("use {} 1 or more", option));
  if (threads > max_threads())
    throw InputError(SourceLoc{}, option,
                     fmt::format("{} threads on a machine with {} hardware threads", threads,
                                 std::thread::hardware_concurrency()),
                     fmt::format("use {} {} or fewer", option, max_threads()));
}

sim::SimulationCost simulation_cost(const Scenario& s, int64_t data_parallel_size, bool timeline, bool layer_timeline) {
  return sim::estimate_simulate_cost(s, data_parallel_size, timeline, layer_timeline);
}

void admit_simulation(const Scenario& s, int64_t data_parallel_size, uint64_t limit, const std::string& command,
                      bool timeline, bool layer_timeline) {
  const sim::SimulationCost c = simulation_cost(s, data_parallel_size, timeline, layer_timeline);
  if (c.bytes <= static_cast<double>(limit)) return;
  const double limit_d = static_cast<double>(limit);
  // The sequence dominates when a single rank's schedule with this sequence already costs half the estimate.
  const bool by_tokens =
      2 * sim::estimate_simulation_cost(CpCommType::p2p, 1, 1, s.model.seq_length, timeline).bytes > c.bytes;
  std::string key = "parallel.context_parallel_size", fix;
  if (by_tokens) {
    key = "model.seq_length";
    fix = "use a shorter model.seq_length or raise --max-memory";
    if (s.model.qkv_format == QkvFormat::thd) {  // seq_length is derived from the packed sequences
      key = s.model.packing ? "model.packing" : "model.packed_sequence_lengths";
      fix = "use fewer or shorter packed sequences or raise --max-memory";
    }
  } else {
    int64_t cp = s.parallel.context_parallel_size;  // halve until a p2p ring of cp fits
    while (cp > 1 &&
           sim::estimate_simulation_cost(CpCommType::p2p, 1, cp, s.model.seq_length, timeline).bytes > limit_d)
      cp /= 2;
    fix = fmt::format("use a smaller context parallel size (parallel.context_parallel_size={} fits as a p2p ring), "
                      "parallel.cp_comm_type=a2a+p2p with a larger a2a size (ops grow with the ring size P), or "
                      "raise --max-memory",
                      cp);
  }
  throw InputError(s.loc(key), key,
                   fmt::format("{} of this scenario would need {}, and {}", command,
                               cost_text(c.bytes, c.ops, c.events, c.seconds), limit_text(limit)),
                   fix);
}

void admit_verify(const Scenario& s, Dtype dtype, int threads, uint64_t limit) {
  const AttentionShape full = attention_shape(s);
  const double limit_d = static_cast<double>(limit);
  for (CpCommType t : s.parallel.distinct_cp_comm_types()) {
    const CpLayout layout = cp_layout_for(s, t);
    const int64_t a2a = layout.a2a_size();
    const auto cost_for = [&](const std::string& heads, int64_t seq) {
      AttentionShape f = full;
      f.seq_length = seq;
      return estimate_oracle_cost(select_heads(f, a2a, heads).shape, dtype, threads, layout.cp_size());
    };
    const OracleCost c = cost_for(s.oracle.heads, full.seq_length);
    if (c.bytes <= limit_d) continue;
    std::string key = "oracle.heads", fix;
    int64_t heads = std::max<int64_t>(full.heads_q / a2a, 1);  // the largest oracle.heads that fits
    while (heads > 1 && cost_for(std::to_string(heads), full.seq_length).bytes > limit_d) heads /= 2;
    const int64_t step = 2 * s.parallel.context_parallel_size;  // S stays divisible by 2·cp
    int64_t seq = full.seq_length;
    while (seq / 2 >= step && (seq / 2) % step == 0 && cost_for(s.oracle.heads, seq).bytes > limit_d) seq /= 2;
    const bool heads_fit = cost_for(std::to_string(heads), full.seq_length).bytes <= limit_d;
    if (full.packing.thd()) {  // THD derives seq_length from the packed lengths: shorten those instead
      const std::string lengths = s.model.packing ? "model.packing" : "model.packed_sequence_lengths";
      key = heads_fit ? key : lengths;
      fix = fmt::format("{}use fewer or shorter packed sequences ({}: about {} tokens in all{}), or raise --max-memory",
                        heads_fit ? fmt::format("use oracle.heads={}, or ", heads) : "", lengths, seq,
                        heads_fit || cost_for("1", seq).bytes <= limit_d ? " fit" : " is the smallest tried");
    } else if (heads_fit) {
      fix = fmt::format("use oracle.heads={} or a smaller model.seq_length (model.seq_length={} fits), or raise "
                        "--max-memory",
                        heads, seq);
    } else {
      key = "model.seq_length";
      fix = fmt::format("use a smaller model.seq_length (model.seq_length={}{}) with oracle.heads=1, or raise "
                        "--max-memory",
                        seq, cost_for("1", seq).bytes <= limit_d ? " fits" : " is the smallest tried");
    }
    throw InputError(s.loc(key), key,
                     fmt::format("verify {} would hold {} of float64 tensors in the CPU oracle, and {}", to_string(t),
                                 cost_text(c.bytes, 0, 0, c.seconds), limit_text(limit)),
                     fix);
  }
}

void admit_plan(const Scenario& s, int64_t cp_max, int threads, uint64_t limit, const char* option) {
  const int parallel = threads == 0 ? max_threads() : threads;
  const double process = sim::estimate_simulation_cost(CpCommType::p2p, 1, 1, 0).bytes;  // the fixed part
  auto cost_of = [&](int64_t cp) {
    sim::SimulationCost c = sim::estimate_simulation_cost(CpCommType::p2p, 1, cp, s.model.seq_length);
    c.bytes = process + parallel * (c.bytes - process);  // `parallel` options simulate at once
    return c;
  };
  const sim::SimulationCost c = cost_of(cp_max);
  if (c.bytes <= static_cast<double>(limit)) return;
  int64_t cp = cp_max;
  while (cp > 1 && cost_of(cp).bytes > static_cast<double>(limit)) cp /= 2;
  throw InputError(SourceLoc{}, option,
                   fmt::format("plan's largest option (a p2p ring of {} GPUs, {} options at once) would need {}, and "
                               "{}",
                               cp_max, parallel, cost_text(c.bytes, c.ops / parallel, c.events / parallel, c.seconds),
                               limit_text(limit)),
                   fmt::format("use {} with at most {} CP GPUs, fewer --threads, or raise --max-memory", option, cp));
}

}  // namespace hcpsim::app
