#include "hcpsim/config/validation.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <utility>

#include "hcpsim/config/attention_backend.hpp"
#include "hcpsim/config/cp_variant_config.hpp"
#include "hcpsim/config/pipeline_split.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "validation_fail.hpp"
#include "validation_order.hpp"
#include "validation_sequence.hpp"
#include "validation_thd.hpp"
#include "validation_window.hpp"

namespace hcpsim {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

std::string fmt_double(double v) {
  std::ostringstream os;
  os.precision(3);
  os << v;
  return os.str();
}

/// [A, P] of cp_comm_type `t` in a scenario whose hierarchical sizes (if `t` takes them) are checked.
CpSizes sizes_of(const ParallelConfig& p, CpCommType t) {
  const std::vector<int64_t> none;
  return cp_variant(t).sizes(p.context_parallel_size, p.hierarchical_context_parallel_sizes.value_or(none));
}

// Bounds that keep every size, byte count and FLOP count of a schedule exact in int64 / double arithmetic.
// They are far beyond any real model or cluster (2^20 GPUs per parallel dimension, 2^34 tokens).
constexpr int64_t kMaxSize = int64_t{1} << 20;
constexpr int64_t kMaxSeqLength = int64_t{1} << 34;
// Largest attention tensor, b·S·H·max(dk, dv) elements: 2^50 keeps every byte count (×8 B) exact in int64.
constexpr double kMaxTensorElements = 1125899906842624.0;  // 2^50
// Largest full-attention forward FLOP count: at 1 PFLOP/s on one GPU this is 10^6 s, so simulated times stay far
// below the int64 picosecond range (9.2·10^6 s).
constexpr double kMaxAttentionFlops = 1e21;

class Validator {
 public:
  Validator(const Scenario& s, ValidationScope scope, bool suggest = true) : s_(s), scope_(scope), suggest_(suggest) {}

  [[noreturn]] void fail(const std::string& key, const std::string& problem, const std::string& fix) const {
    throw InputError(s_.loc(key), key, problem, fix);
  }

  /// Like fail(), for a rule between several keys: the location is the first of `keys` set by a command-line
  /// override (the change the user just made), else the location of `key`.
  [[noreturn]] void fail_between(const std::string& key, const std::vector<std::string>& keys,
                                 const std::string& problem, const std::string& fix) const {
    hcpsim::fail_between(s_, key, keys, problem, fix);
  }

  /// Like fail_between(), but the first overridden key of `keys` is also the key named (the override that broke
  /// the rule); without an override, `key` at its location.
  [[noreturn]] void blame(const std::string& key, const std::vector<std::string>& keys, const std::string& problem,
                          const std::string& fix) const {
    for (const auto& k : keys) {
      const SourceLoc l = s_.loc(k);
      if (!l.override_text.empty()) throw InputError(l, k, problem, fix);
    }
    fail(key, problem, fix);
  }

  void positive(const std::string& key, int64_t v, int64_t max = kMaxSize) const {
    if (v < 1) fail(key, "must be at least 1, got " + str(v), "set a positive value");
    if (v > max) fail(key, str(v) + " is larger than hcpsim models (at most " + str(max) + ")", "use a realistic value");
  }

  ValidationReport run() {
    check_model();
    check_parallel();
    if (scope_ == ValidationScope::placement) check_cluster();
    return report_;
  }

 private:
  void check_model() {
    const ModelConfig& m = s_.model;
    check_thd_model(s_);  // first: with thd, seq_length follows from the packed sequences
    check_window_size(s_, report_.warnings);
    positive("model.num_attention_heads", m.num_attention_heads);
    positive("model.num_query_groups", m.num_query_groups);
    positive("model.kv_channels", m.kv_channels);
    positive("model.kv_channels_v", m.kv_channels_v);
    positive("model.seq_length", m.seq_length, kMaxSeqLength);
    positive("model.micro_batch_size", m.micro_batch_size);
    positive("model.num_layers", m.num_layers);
    const double elements = static_cast<double>(m.micro_batch_size) * static_cast<double>(m.seq_length) *
                            static_cast<double>(m.num_attention_heads) *
                            static_cast<double>(std::max(m.kv_channels, m.kv_channels_v));
    if (elements > kMaxTensorElements)
      fail("model.seq_length",
           "the attention tensors would have " + fmt_double(elements) + " elements, more than hcpsim represents (2^50)",
           "use a smaller seq_length, micro_batch_size, head count or head dim");
    const double flops = 2.0 * static_cast<double>(m.kv_channels + m.kv_channels_v) * static_cast<double>(m.seq_length) *
                         static_cast<double>(m.seq_length) * static_cast<double>(m.num_attention_heads) *
                         static_cast<double>(m.micro_batch_size);
    if (flops > kMaxAttentionFlops)
      fail("model.seq_length", "one attention layer would need " + fmt_double(flops) + " FLOPs, more than 1e21",
           "use a smaller seq_length or micro_batch_size");
    if (m.num_attention_heads % m.num_query_groups != 0)
      fail("model.num_query_groups",
           "num_attention_heads " + str(m.num_attention_heads) + " is not divisible by num_query_groups " +
               str(m.num_query_groups) + " (each KV head must serve a whole group of query heads)",
           "use a divisor of " + str(m.num_attention_heads));
    for (const auto& [key, v] : {std::pair<const char*, std::optional<int64_t>>{"model.hidden_size", m.hidden_size},
                                 {"model.ffn_hidden_size", m.ffn_hidden_size},
                                 {"model.global_batch_size", m.global_batch_size},
                                 {"model.vocab_size", m.vocab_size}})
      if (v) positive(key, *v, int64_t{1} << 30);
  }

  /// A legal split to suggest: the largest a2a size A < cp dividing cp for which the whole scenario validates with
  /// [A, cp/A] (the same rules, TE's backend filters included), preferring TP·A inside one node (a2a on NVLink,
  /// ring across groups, as the Megatron-Bridge HCP guide recommends). "" when no A ≥ 2 validates.
  std::string suggest_sizes() const {
    if (!suggest_) return "";
    const int64_t cp = s_.parallel.context_parallel_size, tp = s_.parallel.tensor_model_parallel_size;
    for (const bool in_node : {true, false})
      for (int64_t a = cp - 1; a >= 2; --a) {
        if (cp % a != 0 || (tp * a <= s_.cluster.gpus_per_node) != in_node || !sizes_validate(a, cp / a)) continue;
        return ", e.g. [" + str(a) + ", " + str(cp / a) + "] (a2a over " + str(a) + " GPUs" +
               (in_node ? " of a node" : "") + ", p2p ring over " + str(cp / a) + " groups)";
      }
    return "";
  }

  /// Whether the scenario with `change` applied validates (checked without suggestions of its own).
  template <typename Change>
  bool validates_with(Change change) const {
    return why_not_with(change).empty();
  }
  /// Why the scenario with `change` applied does not validate ("key: problem"), or "" when it does.
  template <typename Change>
  std::string why_not_with(Change change) const {
    Scenario t = s_;
    change(t.parallel);
    try {
      (void)Validator(t, scope_, false).run();
      return "";
    } catch (const InputError& e) {
      return e.key() + ": " + e.problem();
    }
  }

  /// When no [A, P] validates (suggest_sizes is empty): the first A in suggest_sizes' order that splits the heads
  /// and what else stops it, so that the heads are not blamed for a limit they do not set; "" when no A splits them.
  std::string sizes_blocked_elsewhere(int64_t h_tp, int64_t hkv_tp) const {
    const int64_t cp = s_.parallel.context_parallel_size, tp = s_.parallel.tensor_model_parallel_size;
    for (const bool in_node : {true, false})
      for (int64_t a = cp - 1; a >= 2; --a) {
        if (cp % a != 0 || (tp * a <= s_.cluster.gpus_per_node) != in_node || h_tp % a != 0 || hkv_tp % a != 0)
          continue;
        const int64_t p = cp / a;
        const std::string why =
            why_not_with([a, p](ParallelConfig& c) { c.hierarchical_context_parallel_sizes = std::vector<int64_t>{a, p}; });
        return "[" + str(a) + ", " + str(p) + "] splits these heads but does not validate either (" + why + ")";
      }
    return "";
  }

  /// The scenario with context_parallel_size `cp` (and its hierarchical sizes) validates: a fix that suggests it
  /// must hold (seq_length divisible by 2·cp, the heads split, the cluster large enough, ...).
  bool cp_validates(int64_t cp) const {
    return suggest_ && validates_with([cp](ParallelConfig& p) { p.context_parallel_size = cp; });
  }

  /// The scenario with hierarchical sizes [a, p] (cp_comm_type a2a+p2p where it named another type) validates.
  bool sizes_validate(int64_t a, int64_t p) const {
    return validates_with([a, p](ParallelConfig& c) { c.hierarchical_context_parallel_sizes = std::vector<int64_t>{a, p}; });
  }

  /// The parallel-config rules, in the order their errors are reported.
  void check_parallel() {
    check_parallel_sizes();
    check_cp_comm_type_list();
    check_hierarchical_sizes();
    check_sequence_split(s_);
    const std::vector<int> te = parsed_te_version();
    for (CpCommType t : s_.parallel.distinct_cp_comm_types()) {
      check_a2a_head_split(t);
      check_cp_type_support(t, te);
      check_thd_cp_comm_type(s_, t, te);
      check_te_backend(t);
    }
    check_step_layout();
    add_parallel_warnings();
    add_recompute_warning();
  }

  /// Each parallel size is positive, the order is a known one, and TP divides both head counts.
  void check_parallel_sizes() const {
    const ParallelConfig& p = s_.parallel;
    const ModelConfig& m = s_.model;
    positive("parallel.tensor_model_parallel_size", p.tensor_model_parallel_size);
    positive("parallel.pipeline_model_parallel_size", p.pipeline_model_parallel_size);
    positive("parallel.context_parallel_size", p.context_parallel_size);
    if (p.data_parallel_size) positive("parallel.data_parallel_size", *p.data_parallel_size);
    check_parallel_order(s_, std::nullopt);
    const int64_t tp = p.tensor_model_parallel_size;
    if (m.num_attention_heads % tp != 0 || m.num_query_groups % tp != 0)
      fail("parallel.tensor_model_parallel_size",
           "tensor_model_parallel_size " + str(tp) + " must divide num_attention_heads " +
               str(m.num_attention_heads) + " and num_query_groups " + str(m.num_query_groups),
           "choose a TP size that divides both head counts");
  }

  /// A per-layer cp_comm_type list has one entry per layer.
  void check_cp_comm_type_list() const {
    const size_t n_types = s_.parallel.cp_comm_type.size();
    if (n_types != 1 && static_cast<int64_t>(n_types) != s_.model.num_layers)
      fail("parallel.cp_comm_type",
           "a per-layer list must have one entry per layer: " + str(static_cast<int64_t>(n_types)) +
               " entries for num_layers " + str(s_.model.num_layers),
           "give one value, or exactly num_layers values");
  }

  /// Whether a comm type of the scenario takes hierarchical sizes (a2a+p2p).
  bool uses_hierarchical_sizes() const {
    const auto& types = s_.parallel.cp_comm_type;
    return std::any_of(types.begin(), types.end(), [](CpCommType t) { return cp_variant(t).takes_hierarchical_sizes; });
  }

  /// hierarchical_context_parallel_sizes are given when a2a+p2p is used (with another type they are unused), as two
  /// sizes [A, P] with A*P = cp, and not with decentralized process groups.
  void check_hierarchical_sizes() const {
    const ParallelConfig& p = s_.parallel;
    const int64_t cp = p.context_parallel_size;
    const bool uses_hier = uses_hierarchical_sizes();
    const auto& sizes = p.hierarchical_context_parallel_sizes;
    const std::string sizes_key = "parallel.hierarchical_context_parallel_sizes";
    if (uses_hier && !sizes)
      fail("parallel.cp_comm_type",
           "cp_comm_type a2a+p2p needs hierarchical_context_parallel_sizes; without them Megatron builds no "
           "hierarchical groups, TE receives cp_group=None and training silently runs WITHOUT context parallelism "
           "(each rank attends only to its own chunks)",
           "set parallel.hierarchical_context_parallel_sizes: [A, P] with A*P = context_parallel_size " + str(cp) +
               suggest_sizes());
    if (!sizes) return;  // with another comm type: legal (Megatron asserts only A*P = CP), add_parallel_warnings
    if (sizes->size() != 2)
      fail(sizes_key, "expected two sizes [A, P] (a2a level, p2p level), got " + str(static_cast<int64_t>(sizes->size())),
           "write [A, P] with A*P = context_parallel_size");
    int64_t prod = 1;
    for (int64_t v : *sizes) {
      if (v < 1) fail(sizes_key, "every size must be at least 1, got " + str(v), "use positive sizes");
      if (v > kMaxSize) fail(sizes_key, "size " + str(v) + " is larger than hcpsim models", "use a realistic value");
      prod *= v;  // two factors ≤ 2^20: exact
    }
    if (prod != cp)
      fail_between(sizes_key, {sizes_key, "parallel.context_parallel_size"},
           str((*sizes)[0]) + "*" + str((*sizes)[1]) + " = " + str(prod) + " != context_parallel_size " + str(cp),
           "choose [A, P] with A*P = " + str(cp) + suggest_sizes() +
               (cp_validates(prod) ? ", or change context_parallel_size to " + str(prod) : std::string()));
    if (p.use_decentralized_pg)
      fail("parallel.use_decentralized_pg",
           "decentralized process groups do not support hierarchical_context_parallel_sizes (Megatron-Bridge raises "
           "NotImplementedError)",
           "set use_decentralized_pg: false");
  }

  /// parallel.te_version as {major, minor, patch}, or {} when not given.
  std::vector<int> parsed_te_version() const {
    std::vector<int> te;
    const auto& text = s_.parallel.te_version;
    if (text) {
      te = parse_version(*text);
      if (te.empty()) fail("parallel.te_version", "'" + *text + "' is not a version", "write e.g. te_version: \"2.4\"");
    }
    return te;
  }

  /// Ulysses (a2a, and the a2a level of a2a+p2p) scatters heads: the a2a size divides the heads per TP rank.
  void check_a2a_head_split(CpCommType t) const {
    const ParallelConfig& p = s_.parallel;
    const ModelConfig& m = s_.model;
    const CpVariantConfig& row = cp_variant_config(t);
    const int64_t tp = p.tensor_model_parallel_size, cp = p.context_parallel_size;
    if (cp <= 1 || row.a2a_size_key.empty()) return;
    const int64_t h_tp = m.num_attention_heads / tp, hkv_tp = m.num_query_groups / tp;
    const int64_t a = sizes_of(p, t)[0];
    const std::string& key = row.a2a_size_key;
    if (h_tp % a == 0 && hkv_tp % a == 0) return;
    std::string problem = "heads per TP rank (num_attention_heads/TP = " + str(h_tp) +
                          ", num_query_groups/TP = " + str(hkv_tp) + ") must both be divisible by " +
                          row.a2a_size_what + " = " + str(a) + " (Ulysses scatters heads)";
    if (hkv_tp == 1) problem += "; with one KV head per TP rank (MQA) no a2a size >= 2 is possible";
    // The head count that is not divisible is the culprit (num_query_groups 3 at A = 2, not heads 12).
    const bool kv_culprit = hkv_tp % a != 0;
    const char* culprit = kv_culprit ? "model.num_query_groups" : "model.num_attention_heads";
    std::string fix = row.head_split_fix(h_tp, hkv_tp);
    if (row.a2a_size_key == "parallel.hierarchical_context_parallel_sizes" && suggest_) {
      const std::string sizes = suggest_sizes();
      const std::string elsewhere = sizes.empty() ? sizes_blocked_elsewhere(h_tp, hkv_tp) : "";
      const std::string note = !sizes.empty()     ? " (" + sizes.substr(2) + ")"
                               : elsewhere.empty() ? " (no [A, P] with A*P = " + str(cp) + " validates with these heads)"
                                                   : " (" + elsewhere + ")";
      // The sizes illustrate the A to choose: they go before the alternative ", or use p2p".
      const auto alt = fix.rfind(", or use ");
      fix.insert(alt == std::string::npos ? fix.size() : alt, note);
    }
    blame(key, {culprit, key, "parallel.tensor_model_parallel_size", "parallel.context_parallel_size",
                "parallel.cp_comm_type"}, problem, fix);
  }

  /// TE's attention backend filters (resolve_attention_kernel): some backend must be left for `t`, or TE raises
  /// "No dot product attention backend is available". Records the backend that would run.
  void check_te_backend(CpCommType t) {
    const AttentionKernelChoice choice = resolve_attention_kernel(s_, t);
    if (!choice.available) {
      std::string why;
      for (const auto& d : choice.disabled) why += (why.empty() ? "" : "; ") + d;
      blame(choice.culprit_key, {choice.culprit_key, "model.qkv_format", "model.num_attention_heads",
                                 "model.num_query_groups", "parallel.tensor_model_parallel_size",
                                 "model.attention_backend"},
            "no Transformer Engine attention backend can run cp_comm_type " + to_string(t) + " (" + why +
                "): TE raises \"No dot product attention backend is available for the provided inputs\"",
            te_backend_fix(t));
    }
    report_.attention_backends.emplace_back(t, choice);
  }

  /// What makes a backend available again for `t`, from the rules that fired.
  std::string te_backend_fix(CpCommType t) const {
    const ModelConfig& m = s_.model;
    const int64_t tp = s_.parallel.tensor_model_parallel_size;
    // Both backends take fp16 or bf16 only: in fp32 no other change brings one back.
    if (m.params_dtype != Dtype::bf16 && m.params_dtype != Dtype::fp16) return "use params_dtype: bf16 (--bf16)";
    std::vector<std::string> ways;
    if ((m.num_attention_heads / tp) % 2 != 0 || (m.num_query_groups / tp) % 2 != 0)
      ways.push_back("even head counts per TP rank for FusedAttention (e.g. num_attention_heads " +
                     str(2 * m.num_attention_heads) + ", num_query_groups " + str(2 * m.num_query_groups) + ")");
    if (m.qkv_format == QkvFormat::sbhd) ways.push_back("qkv_format: bshd for FlashAttention");
    if (t != CpCommType::p2p) ways.push_back("cp_comm_type p2p");
    if (attention_call(s_, t).pad_between_seqs)
      ways.push_back("te_version >= 2.16 on Hopper (FlashAttention-3 takes padded packed sequences)");
    if (m.attention_backend != AttentionBackend::auto_select) ways.push_back("attention_backend: auto");
    std::string fix = "use ";
    for (size_t i = 0; i < ways.size(); ++i) fix += (i == 0 ? "" : i + 1 == ways.size() ? ", or " : ", ") + ways[i];
    return ways.empty() ? "change the head dims to multiples of 8 of at most 128" : fix;
  }

  /// What TE supports with cp_comm_type `t`: sliding windows, attention bias, and the first TE release (`te`,
  /// empty when not given) that has it.
  void check_cp_type_support(CpCommType t, const std::vector<int>& te) const {
    const ModelConfig& m = s_.model;
    const CpVariantConfig& row = cp_variant_config(t);
    const int64_t cp = s_.parallel.context_parallel_size;
    if (m.has_sliding_window() && !row.sliding_window)
      fail("model.window_size",
           "sliding window attention is not supported with cp_comm_type " + to_string(t) +
               " (TE supports it with a2a and all_gather)",
           "use cp_comm_type a2a or all_gather, or window_size: [-1, -1]");
    if (m.attention_bias && !row.attention_bias && cp > 1)
      fail("model.attention_bias",
           "attention bias is not supported with cp_comm_type " + to_string(t) +
               " (TE supports core-attention bias with context parallelism only for p2p)",
           "use cp_comm_type p2p, or attention_bias: false");
    const std::vector<int> need(row.min_te_version.begin(), row.min_te_version.end());
    if (!te.empty() && cp > 1 && te < need) {
      fail("parallel.te_version",
           "cp_comm_type " + to_string(t) + " needs Transformer Engine >= " + str(need[0]) + "." + str(need[1]) +
               ", got " + *s_.parallel.te_version,
           "upgrade Transformer Engine to " + str(need[0]) + "." + str(need[1]) + " or newer");
    }
  }

  /// Whole-step rules: layers split over pipeline (and virtual) stages as Megatron splits them
  /// (pipeline_split.hpp), TP divides the MLP width. Source: Megatron-LM megatron/training/arguments.py
  /// validate_args.
  void check_step_layout() const {
    const ParallelConfig& p = s_.parallel;
    const ModelConfig& m = s_.model;
    const int64_t pp = p.pipeline_model_parallel_size, tp = p.tensor_model_parallel_size;
    if (p.virtual_pipeline_model_parallel_size) {
      const int64_t v = *p.virtual_pipeline_model_parallel_size;
      positive("parallel.virtual_pipeline_model_parallel_size", v);
      if (v > 1 && pp < 2)
        fail("parallel.virtual_pipeline_model_parallel_size",
             "the interleaved schedule needs pipeline_model_parallel_size > 1, got " + str(pp),
             "remove virtual_pipeline_model_parallel_size or set pipeline_model_parallel_size >= 2");
    }
    const std::vector<int64_t> stage_layers = pipeline_split(s_).stage_layers;  // throws naming the key and the fix
    check_recompute(*std::max_element(stage_layers.begin(), stage_layers.end()));
    check_fp8_param_gather();
    // Source: Megatron-LM arguments.py: "Tensor parallel communication/GEMM overlap can happen only when sequence
    // parallelism is enabled".
    if (p.tp_comm_overlap && !(p.sequence_parallel && tp > 1))
      fail("parallel.tp_comm_overlap",
           "TP communication overlap needs sequence_parallel with tensor_model_parallel_size > 1 (Megatron asserts it)",
           "set parallel.sequence_parallel: true with TP > 1, or remove tp_comm_overlap");
    if (m.ffn_hidden() % tp != 0)
      fail_between("model.ffn_hidden_size", {"model.ffn_hidden_size", "parallel.tensor_model_parallel_size"},
                   "ffn_hidden_size " + str(m.ffn_hidden()) + " is not divisible by tensor_model_parallel_size " +
                       str(tp) + " (the MLP's column-parallel GEMM splits it)",
                   "use a tensor_model_parallel_size dividing " + str(m.ffn_hidden()));
  }

  /// Partial recompute: recompute_method / recompute_num_layers only with full granularity, and N within one
  /// model chunk. Source: Megatron-LM arguments.py ("recompute method is not yet supported for selective
  /// recomputing granularity"), transformer_config.py (recompute_num_layers between 1 and the layers per
  /// pipeline rank; 0 is legal for block).
  void check_recompute(int64_t max_stage_layers) const {
    const TrainingConfig& t = s_.training;
    const bool partial = t.recompute_method != RecomputeMethod::uniform || t.recompute_num_layers.has_value();
    if (partial && t.recompute_granularity != RecomputeGranularity::full)
      fail(t.recompute_num_layers ? "training.recompute_num_layers" : "training.recompute_method",
           "recompute_method / recompute_num_layers apply to recompute_granularity full only, but it is " +
               to_string(t.recompute_granularity) + " (Megatron asserts recompute_method is None otherwise)",
           "set training.recompute_granularity: full, or remove recompute_method and recompute_num_layers (on the "
           "command line: training.recompute_method=null training.recompute_num_layers=null)");
    if (!t.recompute_num_layers) return;
    const int64_t n = *t.recompute_num_layers;
    const int64_t v = s_.parallel.virtual_pipeline_model_parallel_size.value_or(1);
    const int64_t chunk = (max_stage_layers + v - 1) / v;
    const int64_t lo = t.recompute_method == RecomputeMethod::block ? 0 : 1;
    if (n < lo || n > chunk)
      fail("training.recompute_num_layers",
           str(n) + " is outside " + str(lo) + " .. " + str(chunk) + " (the layers of one model chunk of a pipeline "
               "stage; Megatron's transformer_block.py counts recompute_num_layers per chunk)",
           "use a value from " + str(lo) + " to " + str(chunk));
  }

  /// fp8_param_gather needs FP8 and, as Megatron-LM arguments.py asserts ("--fp8-param-gather only supported
  /// with distributed optimizer, torch fsdp2, megatron fsdp, or inference mode"), the distributed optimizer.
  void check_fp8_param_gather() const {
    if (!s_.training.fp8_param_gather) return;
    if (!s_.training.fp8)
      fail("training.fp8_param_gather", "FP8 parameters need FP8 training, but training.fp8 is false",
           "set training.fp8: true, or remove fp8_param_gather");
    if (!s_.parallel.use_distributed_optimizer)
      fail("training.fp8_param_gather",
           "Megatron supports --fp8-param-gather only with the distributed optimizer (arguments.py asserts it)",
           "set parallel.use_distributed_optimizer: true, or remove fp8_param_gather");
  }

  /// Full recompute without recompute_num_layers: hcpsim's shorthand (uniform over groups of one layer), which
  /// Megatron-Core refuses. Source: megatron/core/transformer/transformer_config.py __post_init__ ("Using
  /// recompute_granularity: full so recompute_method must be \"block\" or \"uniform\"", and recompute_num_layers
  /// between 1 and the layers per pipeline rank).
  void add_recompute_warning() {
    const TrainingConfig& t = s_.training;
    if (t.recompute_granularity != RecomputeGranularity::full || t.recompute_num_layers) return;
    report_.warnings.push_back(
        "recompute_granularity full without recompute_num_layers: simulated as recompute_method uniform with "
        "recompute_num_layers 1 (every layer's input saved), but Megatron-Core raises unless both are set "
        "(TransformerConfig: recompute_method must be block or uniform, recompute_num_layers given); set "
        "training.recompute_method and training.recompute_num_layers as the run does");
  }

  /// Whether an a2a group of the first CP group (place_cp_group: Megatron's rank order) holds GPUs of two nodes.
  [[nodiscard]] bool a2a_groups_span_nodes(CpCommType t, int64_t dp) const {
    const auto place = place_cp_group(s_.parallel.order, parallel_sizes(s_, dp), s_.cluster.gpus_per_node);
    const CpLayout layout = cp_layout_for(s_, t);
    for (int64_t pr = 0; pr < layout.p2p_size(); ++pr) {
      const std::vector<int64_t> group = layout.a2a_group(pr);
      for (int64_t g : group)
        if (place[static_cast<size_t>(g)].node != place[static_cast<size_t>(group.front())].node) return true;
    }
    return false;
  }

  /// Legal settings that Megatron or TE quietly turn into something else.
  void add_parallel_warnings() {
    const ParallelConfig& p = s_.parallel;
    const auto& sizes = p.hierarchical_context_parallel_sizes;
    if (p.sequence_parallel && p.tensor_model_parallel_size == 1)
      report_.warnings.push_back(
          "sequence_parallel with tensor_model_parallel_size 1: Megatron turns sequence parallelism off (nothing to "
          "shard over)");
    const bool uses_hier = uses_hierarchical_sizes();
    const std::string type = to_string(p.cp_comm_type.front());
    if (sizes && !uses_hier)
      report_.warnings.push_back("hierarchical_context_parallel_sizes [" + str((*sizes)[0]) + ", " + str((*sizes)[1]) +
                                 "] are not used by cp_comm_type " + type + " (only a2a+p2p uses them; Megatron "
                                 "checks only that they multiply to context_parallel_size): the run is plain " + type);
    if (sizes && uses_hier && p.context_parallel_size > 1) {
      if ((*sizes)[0] == 1)
        report_.warnings.push_back(
            "hierarchical_context_parallel_sizes [1, " + str((*sizes)[1]) +
            "]: the a2a level has size 1, so TE falls back to plain p2p over the p2p group");
      if ((*sizes)[1] == 1)
        report_.warnings.push_back("hierarchical_context_parallel_sizes [" + str((*sizes)[0]) +
                                   ", 1]: the p2p level has size 1, so TE falls back to plain a2a");
    }
  }

  void check_cluster() {
    const ParallelConfig& p = s_.parallel;
    const ClusterSpec& c = s_.cluster;
    positive("cluster.nodes", c.nodes);
    positive("cluster.gpus_per_node", c.gpus_per_node, 1024);
    // The simulator's generated topology gives each GPU a NIC: nics_per_node must divide gpus_per_node (a preset
    // sets 8; overriding gpus_per_node alone breaks it).
    if (c.topology.vertices.empty() && c.nics_per_node > 0 && c.gpus_per_node % c.nics_per_node != 0)
      blame("cluster.nics_per_node", {"cluster.gpus_per_node", "cluster.nics_per_node", "cluster.preset"},
            "gpus_per_node " + str(c.gpus_per_node) + " is not a multiple of nics_per_node " + str(c.nics_per_node) +
                (c.preset.empty() ? "" : " (set by preset " + c.preset + ")") +
                ": the simulator's topology gives each NIC gpus_per_node / nics_per_node GPUs",
            "set cluster.nics_per_node to a divisor of " + str(c.gpus_per_node) + " (e.g. cluster.nics_per_node=" +
                str(c.gpus_per_node) + "), or keep gpus_per_node a multiple of " + str(c.nics_per_node));
    const int64_t world = c.world_size();  // ≤ 2^30
    // Each factor ≤ 2^20, so the product of three fits in int64.
    const int64_t model_ranks = p.tensor_model_parallel_size * p.context_parallel_size * p.pipeline_model_parallel_size;
    int64_t dp = 1;
    if (p.data_parallel_size) {
      dp = *p.data_parallel_size;
      if (model_ranks > world || dp > world / model_ranks)
        fail("parallel.data_parallel_size",
             "TP*CP*DP*PP = " + fmt_double(static_cast<double>(model_ranks) * static_cast<double>(dp)) +
                 " GPUs, but the cluster has " + str(c.nodes) + " x " +
                 str(c.gpus_per_node) + " = " + str(world),
             "use at least " +
                 fmt_double(std::ceil(static_cast<double>(model_ranks) * static_cast<double>(dp) /
                                      static_cast<double>(c.gpus_per_node))) +
                 " nodes, or smaller parallel sizes");
    } else {
      if (model_ranks > world)
        fail("cluster.nodes",
             "TP*CP*PP = " + str(model_ranks) + " GPUs, but the cluster has " + str(c.nodes) + " x " +
                 str(c.gpus_per_node) + " = " + str(world),
             "set cluster.nodes to at least " + str((model_ranks + c.gpus_per_node - 1) / c.gpus_per_node));
      if (world % model_ranks != 0)
        fail("cluster.nodes",
             "the cluster's " + str(world) + " GPUs are not a multiple of TP*CP*PP = " + str(model_ranks) +
                 ", so data_parallel_size cannot fill it",
             "set parallel.data_parallel_size explicitly, or change cluster.nodes");
      dp = world / model_ranks;
    }
    report_.data_parallel_size = dp;
    check_parallel_order(s_, dp);
    if (s_.model.global_batch_size && *s_.model.global_batch_size % (s_.model.micro_batch_size * dp) != 0)
      fail_between("model.global_batch_size",
                   {"model.global_batch_size", "model.micro_batch_size", "parallel.data_parallel_size", "cluster.nodes"},
                   "global_batch_size " + str(*s_.model.global_batch_size) +
                       " is not divisible by micro_batch_size x data_parallel_size = " +
                       str(s_.model.micro_batch_size) + " x " + str(dp) + " (Megatron asserts this)",
                   "use a multiple of " + str(s_.model.micro_batch_size * dp));
    if (s_.training.fp8 && c.gpu.peak_fp8_flops_per_s <= 0)
      fail("training.fp8", "the GPU " + c.gpu.name + " has no FP8 tensor-core rate",
           "set training.fp8: false, or give cluster.gpu.peak_fp8_TFLOP_per_s");
    // Where the a2a groups land: a block of TP*A consecutive global ranks (default order).
    const int64_t tp = p.tensor_model_parallel_size;
    // Megatron's selective recompute checkpoints the core attention only (--recompute-modules core_attn); with
    // flash or fused attention its saved state is already just Q, K, V, the output and softmax_lse.
    if (s_.training.recompute_granularity == RecomputeGranularity::selective)
      report_.warnings.push_back(
          "training.recompute_granularity selective: Megatron recomputes only the core attention, whose flash/fused "
          "kernels keep no score matrix; the step pays one more attention forward per layer and saves no activation "
          "memory (use full recompute to save memory, or none)");
    for (CpCommType t : p.distinct_cp_comm_types()) {
      const int64_t a = sizes_of(p, t)[0];
      if (a < 2) continue;
      if (tp * a > c.gpus_per_node || c.gpus_per_node % (tp * a) != 0) {
        report_.warnings.push_back(
            "cp_comm_type " + to_string(t) + ": TP*A = " + str(tp) + "*" + str(a) + " = " + str(tp * a) +
            " does not divide the " + str(c.gpus_per_node) +
            " GPUs per node, so some a2a groups span nodes and the all-to-all crosses the network; prefer TP*A "
            "dividing " + str(c.gpus_per_node));
      } else if (a2a_groups_span_nodes(t, dp)) {
        report_.warnings.push_back(
            "cp_comm_type " + to_string(t) + ": parallel.order " + p.order +
            " puts the ranks of an a2a group on different nodes (their global ranks are strided by the dimensions "
            "before cp), so the all-to-all crosses the network although TP*A = " + str(tp * a) + " divides the " +
            str(c.gpus_per_node) + " GPUs per node; prefer an order with cp right after tp (tp-cp-ep-dp-pp, "
            "Megatron's default)");
      }
    }
  }

  const Scenario& s_;
  ValidationScope scope_;
  bool suggest_ = true;  ///< false inside suggest_sizes' own validations
  ValidationReport report_;
};

}  // namespace

ValidationReport validate_scenario(const Scenario& scenario, ValidationScope scope) {
  return Validator(scenario, scope).run();
}

}  // namespace hcpsim
