#include "hcpsim/core/fault_injection.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <variant>

#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/cp_variant.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/core/semantics.hpp"
#include "hcpsim/core/schedule_hazards.hpp"

namespace hcpsim {

std::string to_string(FaultKind kind) {
  switch (kind) {
    case FaultKind::cp_silently_disabled: return "cp_silently_disabled";
    case FaultKind::strided_a2a_groups: return "strided_a2a_groups";
    case FaultKind::dropped_lse_merge: return "dropped_lse_merge";
    case FaultKind::naive_lse_merge: return "naive_lse_merge";
    case FaultKind::swapped_causal_sections: return "swapped_causal_sections";
    case FaultKind::stale_kv_backward: return "stale_kv_backward";
    case FaultKind::missing_dkv_hop: return "missing_dkv_hop";
    case FaultKind::bf16_accumulation: return "bf16_accumulation";
    case FaultKind::floor_cu_seqlens: return "floor_cu_seqlens";
    case FaultKind::tail_padding_blind: return "tail_padding_blind";
    case FaultKind::unguarded_empty_merge: return "unguarded_empty_merge";
  }
  HCPSIM_ASSERT(false, "unknown FaultKind");
}

std::vector<FaultKind> all_fault_kinds() {
  return {FaultKind::cp_silently_disabled, FaultKind::strided_a2a_groups,      FaultKind::dropped_lse_merge,
          FaultKind::naive_lse_merge,      FaultKind::swapped_causal_sections, FaultKind::stale_kv_backward,
          FaultKind::missing_dkv_hop,      FaultKind::bf16_accumulation,       FaultKind::floor_cu_seqlens,
          FaultKind::tail_padding_blind,   FaultKind::unguarded_empty_merge};
}

std::optional<FaultKind> parse_fault_kind(std::string_view name) {
  for (FaultKind k : all_fault_kinds()) {
    if (name == to_string(k)) return k;
  }
  return std::nullopt;
}

std::string describe(FaultKind kind) {
  switch (kind) {
    case FaultKind::cp_silently_disabled:
      return "each rank attends only its own two chunks (a2a+p2p without hierarchical sizes, Bridge #2667)";
    case FaultKind::strided_a2a_groups:
      return "a2a groups strided instead of contiguous blocks of A CP ranks (docs/algorithm.md §2.4; needs A >= 2 and P >= 2)";
    case FaultKind::dropped_lse_merge:
      return "LSE merge and output correction overwrite instead of merging: only the last ring step survives";
    case FaultKind::naive_lse_merge:
      return "fp32 log(exp(a)+exp(b)) LSE merge (TE before #716); overflows with input_distribution: adversarial";
    case FaultKind::swapped_causal_sections:
      return "forward lower- and upper-triangle sections exchanged (needs a causal mask and a ring)";
    case FaultKind::stale_kv_backward:
      return "the step-0 KV buffer reused in every backward ring step";
    case FaultKind::missing_dkv_hop:
      return "cp rank 0's last backward dKV message is never sent";
    case FaultKind::bf16_accumulation:
      return "dQ/dKV accumulated in bf16/fp16 as TE's F16 path does (reports error growth with P; not a failure)";
    case FaultKind::floor_cu_seqlens:
      return "packed sequences: per-step valid lengths cu_seqlens // P, padding ignored (TE #1930; THD only)";
    case FaultKind::tail_padding_blind:
      return "packed sequences: pad_between_seqs missed when only the last sequence is padded (TE #3331; THD only)";
    case FaultKind::unguarded_empty_merge:
      return "packed sequences: LSE merge of two empty rows gives NaN (flash-attention #978; THD only)";
  }
  HCPSIM_ASSERT(false, "unknown FaultKind");
}

bool fault_must_fail(FaultKind kind) { return kind != FaultKind::bf16_accumulation; }

bool fault_needs_packing(FaultKind kind) {
  return kind == FaultKind::floor_cu_seqlens || kind == FaultKind::tail_padding_blind ||
         kind == FaultKind::unguarded_empty_merge;
}

namespace {

CpLayout layout_of(const Schedule& s) { return CpLayout(s.a2a_size, s.p2p_size, s.shape.seq_length); }

/// Each rank runs plain (local-order causal) attention on its own zigzag chunks, no communication (§8.4).
Schedule silently_disabled(const Schedule& base) {
  const CpLayout layout = layout_of(base);
  const AttentionShape& sh = base.shape;
  Schedule s;
  s.cp_comm_type = base.cp_comm_type;
  s.a2a_size = base.a2a_size;
  s.p2p_size = base.p2p_size;
  s.shape = sh;
  s.grad_accumulation_in_dtype = base.grad_accumulation_in_dtype;
  const int64_t s_f = 2 * layout.chunk_size();
  const double fwd_pair = attn_fwd_flops_per_pair(sh.head_dim_qk, sh.head_dim_v) * static_cast<double>(sh.batch * sh.heads_q);
  const double bwd_pair = attn_bwd_flops_per_pair(sh.head_dim_qk, sh.head_dim_v) * static_cast<double>(sh.batch * sh.heads_q);
  const BlockMask mask = sh.causal ? BlockMask::causal : BlockMask::none;
  const Section sec = sh.causal ? Section::diagonal : Section::full;
  const double pairs = static_cast<double>(semantics::block_pairs(s_f, s_f, mask));
  for (int64_t g = 0; g < layout.cp_size(); ++g) {
    RankProgram prog;
    prog.rank = g;
    prog.cp_rank = g;
    auto decl = [&](const std::string& name, int64_t heads, int64_t width, Dtype dt) {
      prog.buffers.push_back(BufferDecl{name, sh.batch, s_f, heads, width, dt});
      return static_cast<BufferId>(prog.buffers.size() - 1);
    };
    auto add = [&](OpPayload payload, Phase phase, const std::string& label, double flops) {
      Op op;
      op.payload = std::move(payload);
      op.phase = phase;
      op.stream = Stream::compute;
      op.label = label;
      op.flops = flops;
      prog.ops.push_back(std::move(op));
    };
    const BufferId q = decl("q", sh.heads_q, sh.head_dim_qk, sh.dtype);
    const BufferId k = decl("k", sh.heads_kv, sh.head_dim_qk, sh.dtype);
    const BufferId v = decl("v", sh.heads_kv, sh.head_dim_v, sh.dtype);
    const BufferId dout = decl("dout", sh.heads_q, sh.head_dim_v, sh.dtype);
    const BufferId out = decl("out", sh.heads_q, sh.head_dim_v, sh.dtype);
    const BufferId lse = decl("softmax_lse", sh.heads_q, 1, Dtype::fp32);
    const BufferId dq = decl("dq", sh.heads_q, sh.head_dim_qk, sh.dtype);
    const BufferId dk = decl("dk", sh.heads_kv, sh.head_dim_qk, sh.dtype);
    const BufferId dv = decl("dv", sh.heads_kv, sh.head_dim_v, sh.dtype);
    const auto tokens = layout.tokens_before_a2a(g);
    prog.inputs = {{"q", q, tokens, 0}, {"k", k, tokens, 0}, {"v", v, tokens, 0}, {"dout", dout, tokens, 0}};
    const RowRange all{0, s_f};
    add(AllocOp{out}, Phase::forward, "alloc out", 0);
    add(AllocOp{lse}, Phase::forward, "alloc softmax_lse", 0);
    add(AttnFwdBlockOp{q, k, v, all, all, mask, sec, out, lse}, Phase::forward, "fwd local attention (no CP)",
        fwd_pair * pairs);
    add(AllocOp{dq}, Phase::backward, "alloc dq", 0);
    add(AllocOp{dk}, Phase::backward, "alloc dk", 0);
    add(AllocOp{dv}, Phase::backward, "alloc dv", 0);
    add(AttnBwdBlockOp{q, k, v, out, dout, lse, all, all, mask, sec, dq, dk, dv}, Phase::backward,
        "bwd local attention (no CP)", bwd_pair * pairs);
    prog.outputs = {{"out", out, tokens, 0}, {"softmax_lse", lse, tokens, 0}, {"dq", dq, tokens, 0},
                    {"dk", dk, tokens, 0}, {"dv", dv, tokens, 0}};
    s.ranks.push_back(std::move(prog));
  }
  return s;
}

/// The process at position (p, a) of the contiguous layout holds the data of flat rank a·P + p (§2.4).
void stride_a2a_groups(Schedule& s) {
  const CpLayout layout = layout_of(s);
  const int64_t A = s.a2a_size, P = s.p2p_size;
  if (A == 1) return;
  const int64_t c = layout.chunk_size();
  auto flat_of = [&](int64_t g) { return layout.a2a_rank(g) * P + layout.p2p_rank(g); };
  for (RankProgram& prog : s.ranks) {
    const int64_t g = prog.cp_rank;
    const auto tokens = layout.tokens_before_a2a(flat_of(g));
    // Post-a2a tokens of this a2a group: half-chunk k of the output = concatenated half-chunk before(A)[k].
    const auto group = layout.a2a_group(layout.p2p_rank(g));
    const auto before = CpLayout::chunk_ids_before_attn(A);
    std::vector<int64_t> post;
    for (int64_t k = 0; k < 2 * A; ++k) {
      const int64_t id = before[static_cast<size_t>(k)];
      const auto member = layout.tokens_before_a2a(flat_of(group[static_cast<size_t>(id / 2)]));
      for (int64_t r = 0; r < c; ++r) post.push_back(member[static_cast<size_t>((id % 2) * c + r)]);
    }
    for (IoBinding& b : prog.inputs) b.tokens = tokens;
    for (IoBinding& b : prog.outputs) b.tokens = b.tensor == "softmax_lse" ? post : tokens;
  }
}

void drop_lse_merge(Schedule& s) {
  for (RankProgram& prog : s.ranks) {
    for (Op& op : prog.ops) {
      if (auto* m = std::get_if<LseMergeOp>(&op.payload)) {
        const LseMergeOp merge = *m;
        op.payload = CopyOp{merge.dst, merge.src, merge.dst_rows, RowRange{0, merge.dst_rows.count}, false};
        op.label += " (dropped: overwrite)";
      } else if (auto* oc = std::get_if<OutCorrectionOp>(&op.payload)) {
        oc->accumulate = false;
      }
    }
  }
}

void naive_merge(Schedule& s) {
  for (RankProgram& prog : s.ranks) {
    for (Op& op : prog.ops) {
      if (auto* m = std::get_if<LseMergeOp>(&op.payload)) m->naive = true;
    }
  }
}

/// Removes the send side of cp rank 0's last backward SendRecvOp and the matching receive on its peer.
void drop_dkv_hop(Schedule& s) {
  RankProgram& r0 = s.ranks[0];
  SendRecvOp* last = nullptr;
  Op* last_op = nullptr;
  for (Op& op : r0.ops) {
    auto* sr = std::get_if<SendRecvOp>(&op.payload);
    if (op.phase == Phase::backward && sr != nullptr && sr->send_peer >= 0) {
      last = sr;
      last_op = &op;
    }
  }
  if (last == nullptr) return;  // P = 1: no dKV messages
  const int64_t peer = last->send_peer, tag = last->send_tag;
  last->send_peer = -1;
  last->send.clear();
  last_op->bytes = 0;
  last_op->label += " (dKV not sent)";
  for (Op& op : s.ranks[static_cast<size_t>(peer)].ops) {
    auto* sr = std::get_if<SendRecvOp>(&op.payload);
    if (sr != nullptr && sr->recv_peer == 0 && sr->recv_tag == tag) {
      sr->recv_peer = -1;
      sr->recv.clear();
      op.label += " (dKV never arrives)";
    }
  }
}

/// The refusals of a packed-sequence fault: a schedule without packed sequences, and for tail_padding_blind a
/// packing whose padding is not at the last sequence only (the fault would change nothing there).
void check_packing_fault(const Schedule& schedule, FaultKind kind) {
  const PackedSequences& packing = schedule.shape.packing;
  if (!packing.thd())
    throw InputError(SourceLoc{}, "oracle.inject",
                     "fault injector " + to_string(kind) + " needs packed sequences (qkv_format thd)",
                     "verify a scenario with packed sequences, or pick another injector from "
                     "'hcpsim verify --inject list'");
  if (kind == FaultKind::tail_padding_blind && !packing.only_tail_padded())
    throw InputError(SourceLoc{}, "oracle.inject",
                     "fault injector tail_padding_blind changes nothing unless only the last sequence is padded",
                     "use a packing whose last sequence alone is not a multiple of 2*cp, or inject floor_cu_seqlens");
  // Without a padded sequence, cu_seqlens // cp is exact and no row is all padding (a real row always sees its
  // own key at ring step 0, so no merge of two empty lse rows happens).
  if ((kind == FaultKind::floor_cu_seqlens || kind == FaultKind::unguarded_empty_merge) && !packing.has_padding())
    throw InputError(SourceLoc{}, "oracle.inject",
                     "fault injector " + to_string(kind) +
                         " changes nothing when no sequence is padded (every length is a multiple of 2*cp)",
                     "use a packing with a length that is not a multiple of 2*cp, e.g. "
                     "model.packed_sequence_lengths=[7, 13]");
}

/// Refuses a ring fault (naive_lse_merge included) on a schedule without a ring (P = 1: pure a2a, or CP 1), swapped_causal_sections without
/// a causal mask and strided_a2a_groups with one a2a group or A = 1: each would leave the schedule as it is, and a
/// PASS would read as the bug being caught or absent.
void check_fault_applies(const Schedule& schedule, FaultKind kind) {
  const int64_t ring = schedule.p2p_size;  // P: the ring's length (CP for plain p2p, 1 for pure a2a)
  const bool needs_ring = kind == FaultKind::swapped_causal_sections || kind == FaultKind::stale_kv_backward ||
                          kind == FaultKind::dropped_lse_merge || kind == FaultKind::missing_dkv_hop ||
                          kind == FaultKind::naive_lse_merge;  // the ring's steps are what the LSE merges join
  if (needs_ring && ring < 2)
    throw InputError(SourceLoc{}, "oracle.inject",
                     "fault injector " + to_string(kind) + " changes nothing without a p2p ring (cp_comm_type " +
                         to_string(schedule.cp_comm_type) + " with P = " + std::to_string(ring) + ")",
                     "inject it into a p2p or a2a+p2p schedule with P >= 2");
  if (kind == FaultKind::swapped_causal_sections && !schedule.shape.causal)
    throw InputError(SourceLoc{}, "oracle.inject",
                     "fault injector swapped_causal_sections changes nothing without a causal mask (no sections)",
                     "set model.attn_mask_type: causal, or pick another injector");
  if (kind == FaultKind::strided_a2a_groups && (schedule.a2a_size < 2 || ring < 2))
    throw InputError(SourceLoc{}, "oracle.inject",
                     "fault injector strided_a2a_groups changes nothing with " +
                         std::string(schedule.a2a_size < 2 ? "A = 1" : "a single a2a group (P = 1)"),
                     "inject it into an a2a+p2p schedule with A >= 2 and P >= 2");
}

}  // namespace

Schedule inject_fault(const Schedule& schedule, FaultKind kind) {
  if (!cp_variant(schedule.cp_comm_type).takes_faults)
    throw InputError(SourceLoc{}, "oracle.inject", "fault injectors apply to p2p, a2a and a2a+p2p schedules only",
                     "use parallel.cp_comm_type a2a+p2p (or p2p, a2a) with --inject");
  if (fault_needs_packing(kind)) check_packing_fault(schedule, kind);
  check_fault_applies(schedule, kind);
  Schedule s;
  switch (kind) {
    case FaultKind::cp_silently_disabled: s = silently_disabled(schedule); break;
    case FaultKind::swapped_causal_sections:
    case FaultKind::stale_kv_backward:
    case FaultKind::floor_cu_seqlens:
    case FaultKind::tail_padding_blind:
    case FaultKind::unguarded_empty_merge: {
      BuilderFaults f;
      f.swapped_causal_sections = kind == FaultKind::swapped_causal_sections;
      f.stale_kv_backward = kind == FaultKind::stale_kv_backward;
      f.floor_cu_seqlens = kind == FaultKind::floor_cu_seqlens;
      f.tail_padding_blind = kind == FaultKind::tail_padding_blind;
      f.unguarded_empty_merge = kind == FaultKind::unguarded_empty_merge;
      s = build_schedule(schedule.cp_comm_type, layout_of(schedule), schedule.shape, f);
      s.grad_accumulation_in_dtype = schedule.grad_accumulation_in_dtype;
      break;
    }
    default: s = schedule; break;
  }
  if (kind == FaultKind::strided_a2a_groups) stride_a2a_groups(s);
  if (kind == FaultKind::dropped_lse_merge) drop_lse_merge(s);
  if (kind == FaultKind::naive_lse_merge) naive_merge(s);
  if (kind == FaultKind::missing_dkv_hop) drop_dkv_hop(s);
  if (kind == FaultKind::bf16_accumulation) s.grad_accumulation_in_dtype = true;
  s.check_invariants();
#ifndef NDEBUG
  check_hazards(s);
#endif
  return s;
}

}  // namespace hcpsim
