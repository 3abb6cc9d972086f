#include "hcpsim/core/cp_variant.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/parallel_for.hpp"
#include "hcpsim/core/schedule_builder_parts.hpp"
#include "hcpsim/core/schedule_hazards.hpp"

namespace hcpsim {

namespace {

/// TE's a2a+p2p rank (AttnFuncWithCPAndKVP2P with flash_attn_a2a_communicate) for flat CP rank g: p2p (A = 1),
/// a2a (P = 1) and a2a+p2p share it (docs/algorithm.md §3–§5).
void build_ring_rank(Schedule& sched, const CpLayout& layout, int64_t g, const BuilderFaults& faults) {
  RankProgram& prog = sched.ranks[static_cast<size_t>(g)];
  // Reserve about what the program appends (~24 ops and ~9 buffers per ring step, fewer than 80 ops and 30
  // buffers outside the ring), so that growing the vectors does not move the ops already built (each holds a
  // label and a deps vector). Capacity only; the program is unchanged.
  const int64_t P = layout.p2p_size();
  prog.ops.reserve(static_cast<size_t>(25 * P + 80));
  prog.buffers.reserve(static_cast<size_t>(9 * P + 30));
  builder_parts::RankState s = builder_parts::make_rank_state(prog, sched.shape, layout, g, faults);
  if (s.thd) {  // packed sequences: the halves-major THD order (thd_layout.hpp)
    builder_parts::compose_ring_rank(s, s.thd->tokens_before_a2a(g), s.thd->post_a2a_tokens(s.d.p));
    return;
  }
  builder_parts::compose_ring_rank(s, layout.tokens_before_a2a(g), layout.post_a2a_tokens(s.d.p));
}

void build_all_gather_rank(Schedule& sched, const CpLayout& layout, int64_t g, const BuilderFaults&) {
  builder_parts::compose_all_gather_rank(sched, layout, g);
}

/// A flat CP group of cp ranks as one ring: [1, cp] (p2p, all_gather).
CpSizes ring_sizes(int64_t cp, const std::vector<int64_t>&) { return {1, cp}; }

/// The built-in rows, in the planner's sweep order. Sources: TE attn_forward_func_with_cp (dispatch and the
/// a2a+p2p fallbacks), Megatron parallel_state.create_hierarchical_groups (the [A, P] groups).
std::vector<CpVariant> builtin_rows() {
  CpVariant p2p;
  p2p.name = "p2p";
  p2p.comm_type = CpCommType::p2p;
  p2p.sizes = ring_sizes;
  p2p.accepts = [](int64_t a, int64_t) { return a == 1; };
  p2p.plan_sizes = [](int64_t cp) { return std::vector<CpSizes>{{1, cp}}; };
  p2p.runs_hierarchical = [](int64_t a, int64_t) { return a == 1; };
  p2p.takes_faults = true;
  p2p.takes_thd = true;
  p2p.build_rank = build_ring_rank;

  CpVariant a2a = p2p;
  a2a.name = "a2a";
  a2a.comm_type = CpCommType::a2a;
  a2a.sizes = [](int64_t cp, const std::vector<int64_t>&) { return CpSizes{cp, 1}; };
  a2a.accepts = [](int64_t, int64_t p) { return p == 1; };
  a2a.plan_sizes = [](int64_t cp) { return cp > 1 ? std::vector<CpSizes>{{cp, 1}} : std::vector<CpSizes>{}; };
  a2a.runs_hierarchical = [](int64_t a, int64_t p) { return a > 1 && p == 1; };
  a2a.symmetric_a2a_groups = true;

  CpVariant ag;
  ag.name = "all_gather";
  ag.comm_type = CpCommType::all_gather;
  ag.sizes = ring_sizes;
  ag.accepts = [](int64_t a, int64_t) { return a == 1; };
  ag.plan_sizes = [](int64_t cp) { return cp > 1 ? std::vector<CpSizes>{{1, cp}} : std::vector<CpSizes>{}; };
  ag.runs_hierarchical = [](int64_t, int64_t) { return false; };
  ag.build_rank = build_all_gather_rank;
  ag.takes_thd = true;  // TE >= 2.18 (#2829)

  CpVariant hier = a2a;
  hier.name = "a2a+p2p";
  hier.comm_type = CpCommType::a2a_p2p;
  hier.takes_hierarchical_sizes = true;
  hier.sizes = [](int64_t, const std::vector<int64_t>& h) {
    HCPSIM_ASSERT(h.size() == 2, "a2a+p2p needs two hierarchical sizes");
    return CpSizes{h[0], h[1]};
  };
  hier.accepts = [](int64_t, int64_t) { return true; };
  hier.plan_sizes = [](int64_t cp) {  // every divisor A of cp, [A, cp/A]
    std::vector<CpSizes> out;
    for (int64_t a = 1; cp > 1 && a <= cp; ++a)
      if (cp % a == 0) out.push_back({a, cp / a});
    return out;
  };
  hier.runs_hierarchical = [](int64_t a, int64_t p) { return a > 1 && p > 1; };
  return {p2p, a2a, ag, hier};
}

/// The table: rows by name (std::map: stable references, no hashing) and the registration order.
struct Registry {
  std::map<std::string, CpVariant> rows;
  std::vector<std::string> order;
  size_t builtin_count = 0;

  Registry() {
    for (CpVariant& r : builtin_rows()) add(std::move(r));
    builtin_count = order.size();
  }
  void add(CpVariant r) {
    HCPSIM_ASSERT(!r.name.empty() && rows.count(r.name) == 0, "cp variant '" + r.name + "' is already registered");
    HCPSIM_ASSERT(r.sizes && r.accepts && r.plan_sizes && r.runs_hierarchical && r.build_rank,
                  "cp variant '" + r.name + "' lacks a function");
    order.push_back(r.name);
    std::string name = r.name;
    rows.emplace(std::move(name), std::move(r));
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

/// The checks and header fields shared by build_variant_schedule and build_variant_schedule_ranks.
Schedule schedule_header(const CpVariant& v, const CpLayout& layout, const AttentionShape& shape) {
  HCPSIM_ASSERT(v.accepts(layout.a2a_size(), layout.p2p_size()), v.name + " does not take this [A, P] layout");
  HCPSIM_ASSERT(shape.heads_q % layout.a2a_size() == 0, "heads_q must be divisible by A");
  HCPSIM_ASSERT(shape.heads_kv % layout.a2a_size() == 0, "heads_kv must be divisible by A");
  HCPSIM_ASSERT(shape.heads_q % shape.heads_kv == 0, "heads_q must be divisible by heads_kv");
  HCPSIM_ASSERT(shape.seq_length == layout.seq_length(), "shape and layout disagree on seq_length");
  if (shape.packing.thd()) {
    HCPSIM_ASSERT(v.takes_thd, v.name + " does not take packed sequences");
    HCPSIM_ASSERT(shape.packing.total_padded() == shape.seq_length, "packing and seq_length disagree");
    HCPSIM_ASSERT(shape.batch == 1, "packed sequences need batch 1");
  }
  Schedule sched;
  sched.cp_comm_type = v.comm_type;
  sched.a2a_size = layout.a2a_size();
  sched.p2p_size = layout.p2p_size();
  sched.shape = shape;
  sched.ranks.resize(static_cast<size_t>(layout.cp_size()));
  for (size_t g = 0; g < sched.ranks.size(); ++g) {  // a builder fills rank g's program, never its coordinates
    sched.ranks[g].rank = static_cast<int64_t>(g);
    sched.ranks[g].cp_rank = static_cast<int64_t>(g);
  }
  return sched;
}

}  // namespace

CpLayout CpVariant::layout(int64_t cp, const std::vector<int64_t>& hierarchical, int64_t seq_length) const {
  const CpSizes s = sizes(cp, hierarchical);
  return CpLayout(s[0], s[1], seq_length);
}

const CpVariant* find_cp_variant(const std::string& name) {
  const Registry& r = registry();
  const auto it = r.rows.find(name);
  return it == r.rows.end() ? nullptr : &it->second;
}

const CpVariant& cp_variant(CpCommType type) {
  const CpVariant* v = find_cp_variant(to_string(type));
  HCPSIM_ASSERT(v != nullptr, "no cp variant row for " + to_string(type));
  return *v;
}

std::vector<const CpVariant*> cp_variants() {
  const Registry& r = registry();
  std::vector<const CpVariant*> out;
  for (const std::string& name : r.order) out.push_back(&r.rows.at(name));
  return out;
}

const CpVariant& cp_variant_for_hierarchical_sizes(int64_t a2a_size, int64_t p2p_size) {
  const Registry& r = registry();
  for (size_t i = 0; i < r.builtin_count; ++i) {
    const CpVariant& v = r.rows.at(r.order[i]);
    if (v.runs_hierarchical(a2a_size, p2p_size)) return v;
  }
  HCPSIM_ASSERT(false, "no built-in cp variant runs these hierarchical sizes");
}

void register_cp_variant(CpVariant row) { registry().add(std::move(row)); }

void unregister_cp_variant(const std::string& name) {
  Registry& r = registry();
  const auto it = std::find(r.order.begin(), r.order.end(), name);
  HCPSIM_ASSERT(it != r.order.end(), "cp variant '" + name + "' is not registered");
  HCPSIM_ASSERT(static_cast<size_t>(it - r.order.begin()) >= r.builtin_count, "built-in cp variants stay");
  r.order.erase(it);
  r.rows.erase(name);
}

ScopedCpVariant::ScopedCpVariant(CpVariant row) : name_(row.name) { register_cp_variant(std::move(row)); }
ScopedCpVariant::~ScopedCpVariant() { unregister_cp_variant(name_); }
const CpVariant& ScopedCpVariant::row() const { return *find_cp_variant(name_); }

Schedule build_variant_schedule(const CpVariant& variant, const CpLayout& layout, const AttentionShape& shape,
                                const BuilderFaults& faults, int threads) {
  HCPSIM_ASSERT(variant.takes_faults || (!faults.swapped_causal_sections && !faults.stale_kv_backward),
                "no builder faults for " + variant.name);
  Schedule sched = schedule_header(variant, layout, shape);
  parallel_for(layout.cp_size(), threads, [&](int64_t g) {
    variant.build_rank(sched, layout, g, faults);
    sched.ranks[static_cast<size_t>(g)].ops.shrink_to_fit();  // as in build_variant_schedule_ranks
  });
  sched.check_invariants(threads);
#ifndef NDEBUG
  check_hazards(sched);
#endif
  return sched;
}

Schedule build_variant_schedule_ranks(const CpVariant& variant, const CpLayout& layout, const AttentionShape& shape,
                                      const std::vector<int64_t>& cp_ranks, int threads) {
  Schedule sched = schedule_header(variant, layout, shape);
  std::vector<char> built(sched.ranks.size(), 0);
  for (int64_t g : cp_ranks) {
    HCPSIM_ASSERT(g >= 0 && g < layout.cp_size(), "build_schedule_ranks: cp rank out of range");
    HCPSIM_ASSERT(!built[static_cast<size_t>(g)], "build_schedule_ranks: cp rank listed twice");
    built[static_cast<size_t>(g)] = 1;
  }
  parallel_for(static_cast<int64_t>(cp_ranks.size()), threads, [&](int64_t k) {
    const int64_t g = cp_ranks[static_cast<size_t>(k)];
    variant.build_rank(sched, layout, g, BuilderFaults{});
    // Capacity left over from the vector's doubling is up to half of the rank's op storage; a simulation holds
    // every rank's ops at once, so give it back (bench/RESULTS.md "Compact op storage").
    sched.ranks[static_cast<size_t>(g)].ops.shrink_to_fit();
  });
  return sched;
}

}  // namespace hcpsim
