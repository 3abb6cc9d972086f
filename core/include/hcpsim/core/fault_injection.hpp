#pragma once
/// Fault injectors: transform a correct schedule into a known-broken one, to prove that the oracle flags each
/// failure mode seen in practice (docs/architecture.md "Fault injectors"; docs/algorithm.md §2.4, §4.4, §5, §8.4).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hcpsim/core/schedule.hpp"

namespace hcpsim {

/// The injectable faults. Every one but bf16_accumulation must make `hcpsim verify` fail on a causal a2a+p2p
/// schedule with A ≥ 2 and P ≥ 2 (naive_lse_merge with adversarial inputs); bf16_accumulation is TE's real F16
/// behaviour and is measured as error growth with P instead. The packed-sequence faults (fault_needs_packing) apply
/// to THD schedules only, and must make verify fail on a padded packing (tail_padding_blind: padded at the tail).
enum class FaultKind {
  cp_silently_disabled,     ///< every rank attends only its own two chunks, causal in local order (§8.4)
  strided_a2a_groups,       ///< a2a groups strided instead of contiguous (§2.4); harmless when A = 1
  dropped_lse_merge,        ///< LSE merges and output corrections overwrite: only the last step survives
  naive_lse_merge,          ///< fp32 log(exp(a) + exp(b)) merge (pre-#716), overflows for logits ≳ 88.7
  swapped_causal_sections,  ///< forward lower and upper sections exchanged; harmless without a causal mask
  stale_kv_backward,        ///< the step-0 KV buffer reused in every backward step
  missing_dkv_hop,          ///< cp rank 0's last backward dKV message is not sent (nor received)
  bf16_accumulation,        ///< dQ/dKV accumulated in the nominal dtype as TE's F16 path does (§5.3)
  floor_cu_seqlens,         ///< THD: per-step valid lengths cu_seqlens // P (TE #1930, Megatron #1669)
  tail_padding_blind,       ///< THD: TE's old pad_between_seqs detection, blind to tail-only padding (TE #3331)
  unguarded_empty_merge,    ///< THD: LSE merge without the (−inf, −inf) guard: NaN for empty rows (FA #978)
};

/// Field spelling, e.g. "cp_silently_disabled".
std::string to_string(FaultKind kind);
/// Parses the field spelling; std::nullopt if unknown.
std::optional<FaultKind> parse_fault_kind(std::string_view name);
/// Every fault, in declaration order.
std::vector<FaultKind> all_fault_kinds();
/// One-line description of a fault (what it breaks and where the real-world bug comes from).
std::string describe(FaultKind kind);
/// True for faults that verify must detect (all but bf16_accumulation).
bool fault_must_fail(FaultKind kind);
/// True for the packed-sequence faults (floor_cu_seqlens, tail_padding_blind, unguarded_empty_merge), which
/// inject_fault accepts for THD schedules (AttentionShape::packing) only.
bool fault_needs_packing(FaultKind kind);

/// Returns `schedule` with `kind` injected. Works on schedules of build_schedule (p2p, a2a, a2a+p2p);
/// builder-level faults (swapped_causal_sections, stale_kv_backward, cp_silently_disabled and the packed-sequence
/// faults, BuilderFaults) rebuild the schedule from its cp_comm_type, [A, P] and shape. The result passes
/// Schedule::check_invariants.
/// @throws InputError (key "oracle.inject") when the schedule is an all_gather schedule (not supported), when a
///   packed-sequence fault meets a schedule without packed sequences, or when tail_padding_blind meets a packing
///   that is not padded at the last sequence only (where it changes nothing).
Schedule inject_fault(const Schedule& schedule, FaultKind kind);

}  // namespace hcpsim
