#include "plan_search.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "hcpsim/config/cp_variant_config.hpp"
#include "hcpsim/config/pipeline_split.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/config/thd_packing.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/cp_variant.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/step/training_model.hpp"

namespace hcpsim::sim::detail {
namespace {

bool is_fixed(const std::vector<PlanDimension>& fixed, PlanDimension d) {
  return std::find(fixed.begin(), fixed.end(), d) != fixed.end();
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// Whether the scenario's layers split over `pp` stages of `vp` model chunks by its pipeline-split settings
// (config/pipeline_split.hpp pipeline_split: even, account_for_embedding/loss, explicit first/last stages).
bool split_legal(const Scenario& s, int64_t pp, int64_t vp) {
  Scenario t = s;
  t.parallel.pipeline_model_parallel_size = pp;
  t.parallel.virtual_pipeline_model_parallel_size = vp > 1 ? std::optional<int64_t>(vp) : std::nullopt;
  try {
    (void)pipeline_split(t);
    return true;
  } catch (const InputError&) {  // these sizes cannot split the layers
    return false;
  }
}

// Every PP the scenario's pipeline split allows with VP = 1: the divisors of num_layers for an even split, of
// num_layers + e + l with the account_for_* options (Llama3.1-405B: 126 + 2 = 128, so PP 8), the sizes that leave
// the middle stages an even share with explicit first/last stage layers.
std::vector<int64_t> legal_pipeline_sizes(const Scenario& s) {
  std::vector<int64_t> out;
  for (int64_t pp = 1; pp <= s.model.num_layers + 2; ++pp)
    if (split_legal(s, pp, 1)) out.push_back(pp);
  return out;
}

// A dimension's values: the scenario's when fixed, else the list (sorted, unique, each >= 1), else the defaults.
std::vector<int64_t> dimension_values(const std::vector<int64_t>& list, bool fixed, int64_t scenario_value,
                                      std::vector<int64_t> defaults, const std::string& option) {
  if (fixed && !list.empty())
    throw InputError(SourceLoc{}, option, "given together with --fixed holding the same dimension",
                     fmt::format("drop {} or remove its key from --fixed", option));
  if (fixed) return {scenario_value};
  std::vector<int64_t> v = list.empty() ? std::move(defaults) : list;
  for (int64_t x : v)
    if (x < 1) throw InputError(SourceLoc{}, option, "every value must be at least 1", fmt::format("give e.g. {} 1,2,4", option));
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::vector<std::string> texts(const std::vector<int64_t>& v) {
  std::vector<std::string> out;
  for (int64_t x : v) out.push_back(std::to_string(x));
  return out;
}

// The recompute setting a scenario's training.* amounts to (--fixed recompute).
PlanRecompute scenario_recompute(const TrainingConfig& t) {
  if (t.recompute_granularity == RecomputeGranularity::none) return PlanRecompute::none;
  if (t.recompute_granularity == RecomputeGranularity::selective) return PlanRecompute::selective;
  return t.recompute_method == RecomputeMethod::block ? PlanRecompute::partial : PlanRecompute::full;
}

std::string option_label(const PlanOption& o) {
  std::string label = o.label + fmt::format(" PP{}", o.pp);
  if (o.vp > 1) label += fmt::format(" VP{}", o.vp);
  label += fmt::format(" {}", to_string(o.recompute));
  if (o.recompute == PlanRecompute::partial && o.recompute_num_layers > 0)
    label += fmt::format("({})", o.recompute_num_layers);
  return label + fmt::format(" mbs{}", o.micro_batch_size);
}

// One option: a comm type and layout [A, P] at (TP, CP), with PP, VP, recompute and micro-batch.
struct Candidate {
  CpCommType type = CpCommType::p2p;
  int64_t tp = 1, cp = 1, a = 1, p = 1, pp = 1, vp = 1, mbs = 1;
  std::optional<PlanRecompute> recompute;  ///< unset: the scenario's training.* as it is
};

// The scenario of candidate `k`: the common global batch, its sizes and comm type, and enough nodes for --gpus.
// Partial recompute's recompute_num_layers needs the stage split, so it is set by the caller.
Scenario candidate_scenario(const Scenario& scenario, const SearchSpace& space, int64_t global_batch_size,
                            const Candidate& k) {
  Scenario c = scenario;
  c.model.global_batch_size = global_batch_size;
  c.model.micro_batch_size = k.mbs;
  c.parallel.tensor_model_parallel_size = k.tp;
  c.parallel.context_parallel_size = k.cp;
  c.parallel.pipeline_model_parallel_size = k.pp;
  if (k.vp > 1) c.parallel.virtual_pipeline_model_parallel_size = k.vp;
  else c.parallel.virtual_pipeline_model_parallel_size.reset();
  // Packed sequences are padded to multiples of 2·CP: each CP size has its own packed length.
  if (c.model.qkv_format == QkvFormat::thd && thd_seq_length(c) > 0) c.model.seq_length = thd_seq_length(c);
  if (k.tp == 1) {
    // No TP group at TP 1: Megatron turns sequence parallelism off (arguments.py validate_args) and asserts that TP
    // communication overlap has it, so the option runs without both instead of being ruled out for settings the
    // scenario made for its own TP > 1.
    c.parallel.sequence_parallel = false;
    c.parallel.tp_comm_overlap = false;
  } else if (scenario.parallel.tensor_model_parallel_size == 1 && c.model.seq_length / k.cp % k.tp == 0) {
    // A scenario at TP 1 says nothing about sequence parallelism (it has none to set): at TP > 1 the options run
    // with it, as Megatron-Bridge's recipes do whenever TP > 1, where the tokens of a CP rank split over TP.
    c.parallel.sequence_parallel = true;
  }
  c.parallel.cp_comm_type = {k.type};
  c.parallel.hierarchical_context_parallel_sizes.reset();
  if (cp_variant(k.type).takes_hierarchical_sizes)
    c.parallel.hierarchical_context_parallel_sizes = std::vector<int64_t>{k.a, k.p};
  if (k.recompute) {
    TrainingConfig& t = c.training;
    t.recompute_method = RecomputeMethod::uniform;
    t.recompute_num_layers.reset();
    t.recompute_granularity = *k.recompute == PlanRecompute::none        ? RecomputeGranularity::none
                              : *k.recompute == PlanRecompute::selective ? RecomputeGranularity::selective
                                                                         : RecomputeGranularity::full;
    if (*k.recompute == PlanRecompute::partial) t.recompute_method = RecomputeMethod::block;
    // Megatron-Core needs recompute_num_layers with full granularity: uniform over groups of one layer.
    if (*k.recompute == PlanRecompute::full) t.recompute_num_layers = 1;
  }
  if (space.gpus && c.cluster.topology.vertices.empty())
    c.cluster.nodes = std::max(c.cluster.nodes, (*space.gpus + c.cluster.gpus_per_node - 1) / c.cluster.gpus_per_node);
  return c;
}

// The data-parallel size an option with TP·CP·PP = model_gpus gets (validation's rule: DP fills the cluster).
int64_t data_parallel_size_of(const Scenario& s, const SearchSpace& space, int64_t model_gpus) {
  int64_t world = s.cluster.world_size();
  if (space.gpus && s.cluster.topology.vertices.empty())
    world = std::max(world, (model_gpus + s.cluster.gpus_per_node - 1) / s.cluster.gpus_per_node * s.cluster.gpus_per_node);
  return s.parallel.data_parallel_size.value_or(
      model_gpus > 0 && world % model_gpus == 0 ? std::max<int64_t>(1, world / model_gpus) : 1);
}

// CP of (TP, PP): the held CP (0 when --gpus is given too and TP·CP·PP is not it), or model_gpus / (TP·PP); 0 when
// TP·PP does not divide the GPUs.
int64_t cp_of(const SearchSpace& space, int64_t tp, int64_t pp) {
  if (space.cp) return space.model_gpus == 0 || tp * pp * *space.cp == space.model_gpus ? *space.cp : 0;
  return space.model_gpus % (tp * pp) == 0 ? space.model_gpus / (tp * pp) : 0;
}

// One global batch for every option, so step times compare the same work: the scenario's, or else the least
// common multiple of micro_batch_size × DP over the options (each divides it).
int64_t common_global_batch_size(const Scenario& s, const SearchSpace& space) {
  if (s.model.global_batch_size) return *s.model.global_batch_size;
  int64_t batch = 1;
  for (int64_t tp : space.tp)
    for (int64_t pp : space.pp) {
      const int64_t cp = cp_of(space, tp, pp);
      if (cp == 0) continue;
      for (int64_t mbs : space.micro_batch) batch = std::lcm(batch, mbs * data_parallel_size_of(s, space, tp * cp * pp));
    }
  return batch;
}

struct Enumeration {
  const Scenario& scenario;
  const SearchSpace& space;
  PlanResult& result;
  LegalOptions legal;
};

void drop(Enumeration& e, PlanOption o, std::string key, std::string reason) {
  o.label = option_label(o);
  o.dropped_key = std::move(key);
  o.dropped_reason = std::move(reason);
  e.result.dropped.push_back(std::move(o));
}

// Candidate `k`: dropped with the reason (a2a+p2p [1, CP] and [CP, 1] are what TE runs as plain p2p and a2a; a
// scenario validation rejects names the rejected key), or legal with its closed-form memory.
void consider(Enumeration& e, const Candidate& k) {
  ++e.legal.configurations;
  PlanOption o;
  o.cp_comm_type = k.type;
  o.tp = k.tp;
  o.cp = k.cp;
  o.a2a_size = k.a;
  o.p2p_size = k.p;
  o.pp = k.pp;
  o.vp = k.vp;
  o.micro_batch_size = k.mbs;
  o.recompute = k.recompute.value_or(scenario_recompute(e.scenario.training));
  o.label = describe_label(k.type, k.a, k.p, k.tp);
  const CpVariant& runs_as = cp_variant_for_hierarchical_sizes(k.a, k.p);
  if (cp_variant(k.type).takes_hierarchical_sizes && runs_as.comm_type != k.type)
    return drop(e, o, fmt::format("{} runs as plain {}", k.a == 1 ? "[1, CP]" : "[CP, 1]", runs_as.name),
                fmt::format("{} runs as plain {} in TE (see the {} option)", k.a == 1 ? "[1, CP]" : "[CP, 1]",
                            runs_as.name, runs_as.name));
  Scenario c = candidate_scenario(e.scenario, e.space, e.result.global_batch_size, k);
  ValidationReport report;
  try {
    report = validate_scenario(c, ValidationScope::placement);
    if (k.recompute == PlanRecompute::partial) {
      const std::vector<int64_t> stages = pipeline_split(c).stage_layers;
      const int64_t chunk = *std::max_element(stages.begin(), stages.end()) / k.vp;
      if (chunk < 2)
        return drop(e, o, "partial recompute of one-layer chunks",
                    fmt::format("partial recompute: a model chunk of {} layer is all or nothing (see full)", chunk));
      c.training.recompute_num_layers = (chunk + 1) / 2;
      report = validate_scenario(c, ValidationScope::placement);
    }
  } catch (const InputError& err) {
    return drop(e, o, err.key(), err.key() + ": " + err.problem());
  }
  if (c.training.recompute_method == RecomputeMethod::block)
    o.recompute_num_layers = c.training.recompute_num_layers.value_or(0);
  PlanOption d = describe(c, k.type, report.data_parallel_size);
  d.pp = o.pp;
  d.vp = o.vp;
  d.micro_batch_size = o.micro_batch_size;
  d.recompute = o.recompute;
  d.recompute_num_layers = o.recompute_num_layers;
  d.label = option_label(d);
  const int64_t m = std::max<int64_t>(1, e.result.global_batch_size / (k.mbs * report.data_parallel_size));
  d.step.memory = memory_per_gpu(c, report.data_parallel_size, m, 0.0);
  e.legal.options.push_back(std::move(d));
  e.legal.scenarios.push_back(std::move(c));
}

// The interleaving sizes of a PP: VP > 1 needs PP > 1 (Megatron); by default 2 only when each stage's layers split
// into two equal chunks.
std::vector<int64_t> vp_values(const Scenario& s, const SearchSpace& space, int64_t pp, bool listed) {
  std::vector<int64_t> out;
  for (int64_t vp : space.vp) {
    if (vp > 1 && pp < 2) continue;
    if (vp > 1 && !listed && !split_legal(s, pp, vp)) continue;
    out.push_back(vp);
  }
  return out;
}

}  // namespace

std::string describe_label(CpCommType t, int64_t a, int64_t p, int64_t tp) {
  // context_parallel_size 1: no context parallelism, whatever cp_comm_type the option carries (Megatron's p2p).
  if (a * p == 1) return fmt::format("no CP TP{}", tp);
  if (cp_variant(t).takes_hierarchical_sizes) return fmt::format("{} [{},{}] TP{}", to_string(t), a, p, tp);
  return fmt::format("{} TP{}", to_string(t), tp);
}

PlanOption describe(const Scenario& s, CpCommType t, int64_t dp) {
  PlanOption o;
  o.cp_comm_type = t;
  o.tp = s.parallel.tensor_model_parallel_size;
  o.cp = s.parallel.context_parallel_size;
  o.pp = s.parallel.pipeline_model_parallel_size;
  o.vp = s.parallel.virtual_pipeline_model_parallel_size.value_or(1);
  o.micro_batch_size = s.model.micro_batch_size;
  o.recompute = scenario_recompute(s.training);
  o.data_parallel_size = dp;
  const CpLayout layout = cp_layout_for(s, t);
  o.a2a_size = layout.a2a_size();
  o.p2p_size = layout.p2p_size();
  o.label = describe_label(t, o.a2a_size, o.p2p_size, o.tp);
  o.has_a2a = o.a2a_size > 1;  // an a2a level: only a2a and a2a+p2p take A > 1 (CpVariant::accepts)
  if (o.has_a2a) {
    ParallelSizes sizes;
    sizes.tp = o.tp;
    sizes.cp = o.cp;
    sizes.dp = dp;
    sizes.pp = o.pp;
    const auto place = place_cp_group(s.parallel.order, sizes, s.cluster.gpus_per_node);
    o.a2a_intra_node = true;
    for (int64_t p = 0; p < o.p2p_size; ++p) {
      std::set<int64_t> nodes;
      for (int64_t g : layout.a2a_group(p)) nodes.insert(place[static_cast<size_t>(g)].node);
      o.a2a_intra_node = o.a2a_intra_node && nodes.size() == 1;
    }
  }
  return o;
}

SearchSpace resolve_search_space(const Scenario& s, const PlanRequest& r) {
  const SourceLoc cmd{};
  if (r.cp && *r.cp < 1) throw InputError(cmd, "--cp", "must be at least 1", "give a positive CP size");
  if (r.gpus && *r.gpus < 1) throw InputError(cmd, "--gpus", "must be at least 1", "give a positive count");
  SearchSpace space;
  space.fixed = r.fixed;
  std::sort(space.fixed.begin(), space.fixed.end());
  space.fixed.erase(std::unique(space.fixed.begin(), space.fixed.end()), space.fixed.end());
  const auto fixed = [&](PlanDimension d) { return is_fixed(space.fixed, d); };
  const ParallelConfig& p = s.parallel;
  if (fixed(PlanDimension::cp) && r.cp)
    throw InputError(cmd, "--fixed", "cp is held while --cp also sets it", "give one of them");
  space.gpus = r.gpus;
  space.cp = r.cp;
  if (fixed(PlanDimension::cp)) space.cp = p.context_parallel_size;
  // --gpus N fixes TP·CP·PP; with CP held too (--cp or --fixed cp), TP·PP = N / CP. CP alone: the replica grows.
  space.model_gpus = r.gpus ? *r.gpus
                     : space.cp ? 0
                                : p.tensor_model_parallel_size * p.context_parallel_size * p.pipeline_model_parallel_size;
  if (space.cp && r.gpus && *r.gpus % *space.cp != 0)
    throw InputError(cmd, "--gpus",
                     fmt::format("{} GPUs per model replica are not a multiple of CP {} ({})", *r.gpus, *space.cp,
                                 r.cp ? "--cp" : "held by --fixed cp"),
                     fmt::format("give a multiple of {}, e.g. --gpus {}", *space.cp, *space.cp * (*r.gpus / *space.cp + 1)));
  space.tp = dimension_values(r.tp, fixed(PlanDimension::tp), p.tensor_model_parallel_size,
                              divisors(s.cluster.gpus_per_node), "--tp");
  space.pp = dimension_values(r.pp, fixed(PlanDimension::pp), p.pipeline_model_parallel_size,
                              legal_pipeline_sizes(s), "--pp");
  space.vp_listed = !r.vp.empty();
  const int64_t own_vp = p.virtual_pipeline_model_parallel_size.value_or(1);
  space.vp = dimension_values(r.vp, fixed(PlanDimension::vp), own_vp, {1, 2, own_vp}, "--vp");
  // Packed sequences (THD) run one micro-batch of packed sequences per step (TE's cu_seqlens layout).
  const int64_t b = s.model.micro_batch_size;
  space.micro_batch = dimension_values(r.micro_batch, fixed(PlanDimension::micro_batch), b,
                                       s.model.qkv_format == QkvFormat::thd ? std::vector<int64_t>{b}
                                                                             : std::vector<int64_t>{b, 2 * b},
                                       "--micro-batch");
  if (fixed(PlanDimension::recompute) && !r.recompute.empty())
    throw InputError(cmd, "--recompute", "given together with --fixed holding the same dimension",
                     "drop --recompute or remove recompute from --fixed");
  if (!fixed(PlanDimension::recompute)) {
    space.recompute = r.recompute.empty() ? std::vector<PlanRecompute>{PlanRecompute::none, PlanRecompute::selective,
                                                                       PlanRecompute::full, PlanRecompute::partial}
                                          : r.recompute;
    std::sort(space.recompute.begin(), space.recompute.end());
    space.recompute.erase(std::unique(space.recompute.begin(), space.recompute.end()), space.recompute.end());
  }
  for (CpCommType t : scenario_cp_comm_types()) {
    const auto own = p.distinct_cp_comm_types();
    if (!fixed(PlanDimension::cp_comm_type) || std::find(own.begin(), own.end(), t) != own.end())
      space.comm_types.push_back(t);
  }
  auto add = [&](PlanDimension d, std::vector<std::string> values) {
    space.dimensions.push_back({d, std::move(values), fixed(d)});
  };
  add(PlanDimension::tp, texts(space.tp));
  add(PlanDimension::cp, {space.cp ? std::to_string(*space.cp) : fmt::format("{}/(TP*PP)", space.model_gpus)});
  add(PlanDimension::pp, texts(space.pp));
  add(PlanDimension::vp, texts(space.vp));
  std::vector<std::string> rc;
  for (PlanRecompute x : space.recompute) rc.push_back(to_string(x));
  if (rc.empty()) rc.push_back(to_string(scenario_recompute(s.training)));
  add(PlanDimension::recompute, rc);
  add(PlanDimension::micro_batch, texts(space.micro_batch));
  std::vector<std::string> types;
  for (CpCommType t : space.comm_types) types.push_back(to_string(t));
  add(PlanDimension::cp_comm_type, types);
  return space;
}

LegalOptions enumerate_options(const Scenario& s, const SearchSpace& space, PlanResult& result) {
  result.global_batch_size = common_global_batch_size(s, space);
  Enumeration e{s, space, result, {}};
  std::vector<std::optional<PlanRecompute>> recomputes;
  for (PlanRecompute x : space.recompute) recomputes.emplace_back(x);
  if (recomputes.empty()) recomputes.emplace_back(std::nullopt);
  bool any_cp = false;
  for (int64_t tp : space.tp)
    for (int64_t pp : space.pp) {
      const int64_t cp = cp_of(space, tp, pp);
      if (cp == 0) {
        PlanOption d;
        d.tp = tp;
        d.pp = pp;
        d.label = fmt::format("TP{} PP{}", tp, pp);
        d.sizes_only = true;
        if (space.cp) {  // CP held and --gpus given: only TP·PP = GPUs / CP
          d.dropped_key = "TP*CP*PP is not the --gpus count";
          d.dropped_reason = fmt::format("TP*CP*PP = {} x {} x {} = {}, not the {} GPUs of --gpus", tp, *space.cp, pp,
                                         tp * *space.cp * pp, space.model_gpus);
        } else {
          d.dropped_key = "GPUs not divisible by TP*PP";
          d.dropped_reason = fmt::format("{} GPUs are not divisible by TP*PP = {}", space.model_gpus, tp * pp);
        }
        ++e.legal.configurations;
        result.dropped.push_back(d);
        continue;
      }
      any_cp = true;
      for (int64_t vp : vp_values(s, space, pp, space.vp_listed))
        for (const auto& rc : recomputes)
          for (int64_t mbs : space.micro_batch)
            for (CpCommType t : space.comm_types)
              for (const CpSizes& ap : cp_variant(t).plan_sizes(cp))
                consider(e, Candidate{t, tp, cp, ap[0], ap[1], pp, vp, mbs, rc});
    }
  if (!any_cp) {
    // A listed PP the layers cannot split over is named too: it would be ruled out even with fitting GPUs.
    std::vector<int64_t> unsplit;
    for (int64_t pp : space.pp)
      if (!split_legal(s, pp, 1)) unsplit.push_back(pp);
    const std::string layers =
        unsplit.empty() ? ""
                        : fmt::format("; and {} layers do not split over PP {}",
                                      s.model.num_layers, fmt::join(unsplit, ","));
    throw InputError(SourceLoc{}, space.gpus ? "--gpus" : "--tp, --pp",
                     fmt::format("{} GPUs per model replica fit no TP*PP of the lists (TP {}, PP {}){}",
                                 space.model_gpus, fmt::join(space.tp, ","), fmt::join(space.pp, ","), layers),
                     space.cp ? fmt::format("give --gpus as CP {} x TP x PP of the lists", *space.cp)
                              : std::string("give a GPU count divisible by TP*PP, or TP and PP sizes dividing it"));
  }
  return std::move(e.legal);
}

}  // namespace hcpsim::sim::detail
