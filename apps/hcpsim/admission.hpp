#pragma once
/// Admission control (docs/robustness.md "Admission control"): the cost of `simulate`, `plan`, `verify` and `diff`
/// estimated from the scenario before any schedule or tensor exists, and the refusal (InputError, exit 2) of a run
/// whose estimated memory exceeds --max-memory, with a fix that fits the command. Also the bounds on --threads and
/// `plan --gpus/--cp`.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/sim/simulation_cost.hpp"

namespace hcpsim::app {

/// The largest `plan --gpus` and `plan --cp`: 2^17 = 131072 GPUs, above the largest training clusters built.
inline constexpr int64_t kMaxPlanGpus = int64_t{1} << 17;

/// Physical memory of this machine in bytes, sysconf(_SC_PHYS_PAGES)·sysconf(_SC_PAGE_SIZE); 0 when unknown.
uint64_t physical_memory_bytes();

/// The --max-memory default: 80% of physical_memory_bytes() (16 GiB when that is unknown), leaving room for the
/// system and the page cache.
uint64_t default_max_memory();

/// Parses a --max-memory value: a positive number with an optional binary suffix K, M, G or T (also KB/KiB ...),
/// e.g. "4G", "512M", "1.5G", "1073741824" (bytes). @throws InputError naming --max-memory.
uint64_t parse_memory_size(const std::string& text);

/// Adds `--max-memory SIZE` to `cmd`, storing its text in `text` (empty: default_max_memory()).
void add_max_memory_option(CLI::App* cmd, std::string& text);

/// Adds `--quiet` to `cmd` (a command that can run long): no estimate or progress lines on stderr
/// (progress.hpp set_progress_quiet).
void add_quiet_flag(CLI::App* cmd);

/// parse_memory_size(text), or default_max_memory() for an empty text.
uint64_t max_memory_limit(const std::string& text);

/// The most threads a command may start: std::thread::hardware_concurrency(), at least 2 (the default of
/// `replay`), 256 when the machine does not say.
int max_threads();

/// The default thread count of `verify`: std::thread::hardware_concurrency(), 1 when the machine does not say.
/// Results do not depend on it (byte-identical for any count).
int default_threads();

/// @throws InputError naming `option` when threads < 1 ("must be at least 1") or threads > max_threads().
void check_thread_count(int threads, const char* option);

/// The estimated cost of a `simulate` or `diff` of `s` (sim::estimate_simulate_cost: the attention and the
/// whole-step layer, the largest comm type) with DP `data_parallel_size` (ValidationReport::data_parallel_size);
/// `timeline`: every op's timeline entry is kept (--trace, --timeline-svg); `layer_timeline`: --step-trace keeps
/// the whole layer's.
sim::SimulationCost simulation_cost(const Scenario& s, int64_t data_parallel_size, bool timeline, bool layer_timeline);

/// Refuses a `simulate` (command "simulate") or `diff` (command "diff") of `s` with DP `data_parallel_size` whose
/// estimated memory (simulation_cost) exceeds `limit`. @throws InputError naming parallel.context_parallel_size (or
/// model.seq_length when the sequence dominates) with the largest size that fits.
/// `timeline`: --trace keeps every op's timeline entry; `layer_timeline`: --step-trace also keeps the whole
/// transformer layer's.
void admit_simulation(const Scenario& s, int64_t data_parallel_size, uint64_t limit, const std::string& command,
                      bool timeline = false, bool layer_timeline = false);

/// Refuses a `verify` of `s` in `dtype` whose estimated oracle memory (estimate_oracle_cost, for each comm type's
/// checked heads) exceeds `limit`. @throws InputError naming oracle.heads (the largest count that fits) or
/// model.seq_length.
void admit_verify(const Scenario& s, Dtype dtype, int threads, uint64_t limit);

/// Refuses a `plan` whose largest option (a p2p ring over `cp_max` GPUs, `threads` options at once; 0 = all
/// cores) would exceed `limit`. @throws InputError naming `option` ("--cp" or "--gpus").
void admit_plan(const Scenario& s, int64_t cp_max, int threads, uint64_t limit, const char* option);

}  // namespace hcpsim::app
