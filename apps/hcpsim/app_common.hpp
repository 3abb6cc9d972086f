#pragma once
/// Helpers shared by the hcpsim subcommands: scenario arguments, formatting, layout printing.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/config/scenario.hpp"
#include "hcpsim/core/schedule.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/io/provenance.hpp"
#include "hcpsim/oracles/verify.hpp"

namespace hcpsim::app {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;    ///< verification or regression failed
inline constexpr int kExitBadInput = 2;  ///< bad scenario, override, option or configuration
inline constexpr int kExitDevice = 3;    ///< device error or no device
inline constexpr int kExitInternal = 4;  ///< a bug in hcpsim

/// The scenario path and trailing `key.path=value` overrides every scenario command takes.
struct Common {
  std::string scenario_path;
  std::vector<std::string> overrides;
};

/// Adds the positional `scenario` and `overrides` arguments to `cmd`.
void add_scenario_args(CLI::App* cmd, Common& c);
/// "1.50 MiB" style text (binary units).
std::string human_bytes(double bytes);

/// Makes every thread of the process allocate from glibc's one main heap (mallopt M_ARENA_MAX = 1; elsewhere
/// nothing changes). With glibc's default (an arena per thread, up to 8 per core), the rank programs `simulate`
/// builds on its --threads land partly in a second arena, and what they free there (the attention programs the
/// whole-step layer wraps) cannot serve the next phase's allocations on the main thread, which touch fresh pages
/// instead: a2a+p2p at CP = 4096 peak RSS 3.03-3.06 -> 2.54-2.62 GB (bench/RESULTS.md, "Session of 2026-12-08").
/// The builders allocate per rank, not per op, so the shared lock costs no measurable time there (measured on 2
/// cores); only `simulate` calls it, the other commands keep glibc's per-thread arenas. Call before any thread
/// starts. Results never depend on it.
void use_one_malloc_arena();
/// "12.345 us" / "ms" / "s" text of a picosecond duration.
std::string human_time_ps(int64_t ps);
/// "none" | "causal" | "causal_bottom_right".
const char* mask_name(BlockMask m);
/// "[1, 2, 3]".
std::string join(const std::vector<int64_t>& v);
/// Prints the scenario name and model shape line.
void print_header(const Scenario& s);
/// Prints each validation warning on its own "warning: " line.
void print_warnings(const ValidationReport& r);
/// One process group of the placed job.
struct RankGroup {
  std::vector<int64_t> global_ranks;  ///< members in group-rank order
  std::vector<int64_t> nodes;         ///< the node of each member (same order)
  bool one_node = true;               ///< every member on the same node
};
/// The process groups of the first CP group of `type` (as Megatron's logs name them), placed with `dp`.
struct CpGroups {
  RankGroup context_parallel;   ///< CONTEXT_PARALLEL_GROUP
  int64_t num_cp_groups = 0;    ///< TP * DP * PP groups like it
  std::vector<RankGroup> a2a;   ///< HIERARCHICAL_CONTEXT_PARALLEL_GROUPS level 0, one per p2p rank (a2a+p2p only)
  std::vector<RankGroup> p2p;   ///< level 1, one per a2a rank (a2a+p2p only; empty otherwise)
};
/// The CpGroups of `s` for `type` with data-parallel size `dp` (place_cp_group with the scenario's order).
CpGroups cp_groups_of(const Scenario& s, CpCommType type, int64_t dp);
/// Prints the process groups of the first CP group as a Megatron log names them, with node placement.
void print_layout(const Scenario& s, CpCommType type, int64_t dp);
/// Prints every rank's ops, one line each.
void print_schedule(const Schedule& s);
/// What produced a run of `s` (loaded with `overrides`): the build, config to_yaml(s) as the effective scenario,
/// the overrides and oracle.seed.
Provenance scenario_provenance(const Scenario& s, const std::vector<std::string>& overrides);
/// The scenario's distinct comm types (every one has a schedule builder, all_gather included).
std::vector<CpCommType> buildable_types(const Scenario& s);
/// The file-name suffix of comm type `t`'s outputs: ".<type>" when the run has several comm types (a per-layer
/// list), else "" (FILE.a2a+p2p, FILE.p2p; one type writes FILE itself).
std::string type_suffix(const std::vector<CpCommType>& types, CpCommType t);

/// Subcommand registration: each adds its options and sets `exit_code` from its callback.
/// Callbacks throw InputError / DeviceError, which main() maps to exit codes.
CLI::App* add_validate_command(CLI::App& app, int& exit_code);
CLI::App* add_verify_command(CLI::App& app, int& exit_code);
CLI::App* add_simulate_command(CLI::App& app, int& exit_code);
CLI::App* add_replay_command(CLI::App& app, int& exit_code);
CLI::App* add_compare_command(CLI::App& app, int& exit_code);
CLI::App* add_import_command(CLI::App& app, int& exit_code);
CLI::App* add_check_log_command(CLI::App& app, int& exit_code);
CLI::App* add_calibrate_command(CLI::App& app, int& exit_code);
CLI::App* add_plan_command(CLI::App& app, int& exit_code);
CLI::App* add_diff_command(CLI::App& app, int& exit_code);
CLI::App* add_collective_command(CLI::App& app, int& exit_code);
CLI::App* add_shard_command(CLI::App& app, int& exit_code);
CLI::App* add_gather_command(CLI::App& app, int& exit_code);

}  // namespace hcpsim::app
