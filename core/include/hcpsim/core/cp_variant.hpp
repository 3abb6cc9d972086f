#pragma once
/// The CP variants as a table: one row per cp_comm_type with its name (TE's string), its layout [A, P] for a CP
/// group, its schedule builder, and the facts other modules ask about (hierarchical sizes, planner sweep, TE's
/// a2a+p2p fallbacks, symmetry reduction, fault injectors). Config keeps the config side of each row under the same
/// name (hcpsim/config/cp_variant_config.hpp). docs/architecture.md "Adding a CP variant".
/// Source: TE context_parallel.py attn_forward_func_with_cp (the cp_comm_type dispatch), docs/algorithm.md §8.1.

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/core/types.hpp"

namespace hcpsim {

/// [A, P]: a2a (level 0) and p2p (level 1) group sizes, A·P = cp.
using CpSizes = std::array<int64_t, 2>;

/// One CP variant. Rows are values: copy a built-in row and change what differs to make a new one.
struct CpVariant {
  /// The key: TE's cp_comm_type spelling ("p2p", "a2a", "a2a+p2p", "all_gather") or a new variant's name.
  std::string name;
  /// The comm type the built schedules carry in Schedule::cp_comm_type (what reports and dumps print): a built-in
  /// row's own type; a new variant names the built-in type whose messages it uses.
  CpCommType comm_type = CpCommType::p2p;
  /// True when the layout comes from hierarchical_context_parallel_sizes (a2a+p2p only).
  bool takes_hierarchical_sizes = false;
  /// [A, P] of a CP group of `cp` ranks; `hierarchical` = hierarchical_context_parallel_sizes, two entries, read
  /// only when takes_hierarchical_sizes (validation checked them).
  std::function<CpSizes(int64_t cp, const std::vector<int64_t>& hierarchical)> sizes;
  /// True when the builder takes layout [A, P] (p2p and all_gather: A = 1; a2a: P = 1; a2a+p2p: any).
  std::function<bool(int64_t a2a_size, int64_t p2p_size)> accepts;
  /// The layouts the planner sweeps for a CP group of `cp` ranks, in sweep order (empty: none at this cp).
  std::function<std::vector<CpSizes>(int64_t cp)> plan_sizes;
  /// True when TE runs a2a+p2p with sizes [A, P] as this variant (its fallback: [1, P] is p2p, [A, 1] is a2a).
  std::function<bool(int64_t a2a_size, int64_t p2p_size)> runs_hierarchical;
  /// True when the members of one a2a group are equivalent for timing, so that the layout's symmetry classes
  /// (CpLayout::symmetry_classes) may stand for each other (the simulator's symmetry reduction; docs/simulator.md).
  bool symmetric_a2a_groups = false;
  /// True when the fault injectors (fault_injection.hpp) and BuilderFaults apply to its schedules.
  bool takes_faults = false;
  /// Whether build_rank handles packed sequences (AttentionShape::packing, thd_layout.hpp). Additive field.
  bool takes_thd = false;
  /// Builds the program of flat CP rank g into sched.ranks[g] (sched has its header and sizes set, and every
  /// program its rank and cp_rank); faults are all false unless takes_faults.
  std::function<void(Schedule& sched, const CpLayout& layout, int64_t g, const BuilderFaults& faults)> build_rank;

  /// The layout of a CP group of `cp` ranks over `seq_length` tokens: CpLayout(sizes(cp, hierarchical), S).
  [[nodiscard]] CpLayout layout(int64_t cp, const std::vector<int64_t>& hierarchical, int64_t seq_length) const;
};

/// The row named `name`, or nullptr. Built-in rows always exist.
const CpVariant* find_cp_variant(const std::string& name);
/// The row of a built-in comm type (its name is to_string(type)).
const CpVariant& cp_variant(CpCommType type);
/// Every row in registration order: the built-ins p2p, a2a, all_gather, a2a+p2p (the planner's sweep order),
/// then rows added by register_cp_variant. Deterministic: never depends on hashing or addresses.
std::vector<const CpVariant*> cp_variants();
/// The built-in row TE runs for a2a+p2p sizes [A, P] (p2p for A = 1, a2a for P = 1, else a2a+p2p).
const CpVariant& cp_variant_for_hierarchical_sizes(int64_t a2a_size, int64_t p2p_size);

/// Adds a row. Every function of the row must be set and the name new (HCPSIM_ASSERT). Not thread-safe: register
/// before building schedules on several threads.
void register_cp_variant(CpVariant row);
/// Removes a row added by register_cp_variant (HCPSIM_ASSERT: it exists and is not built-in).
void unregister_cp_variant(const std::string& name);

/// Registers `row` for the lifetime of the object (tests, experiments), unregistering it on destruction.
class ScopedCpVariant {
 public:
  explicit ScopedCpVariant(CpVariant row);
  ~ScopedCpVariant();
  ScopedCpVariant(const ScopedCpVariant&) = delete;
  ScopedCpVariant& operator=(const ScopedCpVariant&) = delete;
  /// The registered row.
  [[nodiscard]] const CpVariant& row() const;

 private:
  std::string name_;
};

/// Builds the forward + backward schedule of `variant` for every CP rank, then runs Schedule::check_invariants
/// (and check_hazards in debug builds). Preconditions (HCPSIM_ASSERT): variant.accepts(A, P), A divides both head
/// counts, heads_kv divides heads_q, shape and layout agree on S, faults only when variant.takes_faults.
/// @param threads  rank programs built at once (parallel_for; build_rank must write only sched.ranks[g], as the
///   built-in rows do); the schedule is the same for any count.
Schedule build_variant_schedule(const CpVariant& variant, const CpLayout& layout, const AttentionShape& shape,
                                const BuilderFaults& faults = {}, int threads = 1);

/// build_variant_schedule for the listed CP ranks only (the partial schedule of build_schedule_ranks; not
/// checked). @param cp_ranks  distinct flat CP ranks < layout.cp_size() (HCPSIM_ASSERT). @param threads  as
/// build_variant_schedule's.
Schedule build_variant_schedule_ranks(const CpVariant& variant, const CpLayout& layout, const AttentionShape& shape,
                                      const std::vector<int64_t>& cp_ranks, int threads = 1);

}  // namespace hcpsim
