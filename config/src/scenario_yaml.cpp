// Writes a Scenario as a scenario file with yaml-cpp's emitter (quoting and escaping are the emitter's), section by
// section in the loader's order; numbers are formatted here so that they read back to the same doubles.
#include "hcpsim/config/scenario_yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace hcpsim {
namespace {

/// The shortest decimal text that std::stod (the loader's get_double) reads back as exactly `v`.
std::string number_text(double v) {
  std::array<char, 64> buf{};
  const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), res.ptr);
}

/// A unit of the file and the loader's conversion to the struct's unit: stored = file·factor, or file/factor.
struct FileUnit {
  double factor;
  bool loader_divides;
};
constexpr FileUnit kGiga{1e9, false};   // GB → bytes, GB/s → bytes/s
constexpr FileUnit kTera{1e12, false};  // TFLOP/s → FLOP/s
constexpr FileUnit kMicro{1e6, true};   // µs → s

double to_stored(double file_value, FileUnit u) {
  return u.loader_divides ? file_value / u.factor : file_value * u.factor;
}

double plain_inverse(double stored, FileUnit u) {
  return u.loader_divides ? stored * u.factor : stored / u.factor;
}

/// The shortest text of the doubles y within a few ulps of plain_inverse(stored) with to_stored(y) == stored
/// exactly; "" if there is none. The plain inverse can be an ulp off the value the file held (0.5 µs → 5e-7 s →
/// 0.49999999999999994 µs), and writing it would load a neighbouring double; the file's own value, or another
/// double the loader maps to `stored`, lies within an ulp or two.
std::string exact_file_text(double stored, FileUnit u) {
  constexpr int kUlps = 4;
  const double guess = plain_inverse(stored, u);
  std::vector<double> candidates{guess};
  double up = guess, down = guess;
  for (int k = 0; k < kUlps; ++k) {
    up = std::nextafter(up, HUGE_VAL);
    down = std::nextafter(down, -HUGE_VAL);
    candidates.insert(candidates.end(), {up, down});
  }
  std::string best;
  for (const double c : candidates) {
    if (to_stored(c, u) != stored) continue;
    std::string text = number_text(c);
    if (best.empty() || text.size() < best.size()) best = std::move(text);
  }
  return best;
}

/// `stored` in the file's unit (see exact_file_text). A value set in code may have no file value that converts to
/// it exactly; then the text is the one a second pass would choose for the value the loader makes of the plain
/// inverse, so to_yaml stays a fixed point (the value moves by the conversion's rounding, once).
std::string in_file_unit(double stored, FileUnit u) {
  std::string text = exact_file_text(stored, u);
  if (text.empty()) text = exact_file_text(to_stored(plain_inverse(stored, u), u), u);
  return text.empty() ? number_text(plain_inverse(stored, u)) : text;
}

// Key/value writers. Distinct names: a string literal would otherwise pick a bool overload.
void put_str(YAML::Emitter& e, const char* key, const std::string& v) { e << YAML::Key << key << YAML::Value << v; }
void put_int(YAML::Emitter& e, const char* key, int64_t v) { e << YAML::Key << key << YAML::Value << v; }
void put_bool(YAML::Emitter& e, const char* key, bool v) { e << YAML::Key << key << YAML::Value << v; }
void put_num(YAML::Emitter& e, const char* key, double v) { put_str(e, key, number_text(v)); }
void put_unit(YAML::Emitter& e, const char* key, double stored, FileUnit u) { put_str(e, key, in_file_unit(stored, u)); }
void put_int_list(YAML::Emitter& e, const char* key, const std::vector<int64_t>& v) {
  e << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const int64_t x : v) e << x;
  e << YAML::EndSeq;
}
void begin_section(YAML::Emitter& e, const char* key) { e << YAML::Key << key << YAML::Value << YAML::BeginMap; }

/// The THD keys: the packed lengths or their generator when set; pad_between_seqs when set, and as auto with thd.
void emit_packed_sequences(YAML::Emitter& e, const ModelConfig& m) {
  if (m.packed_sequence_lengths) put_int_list(e, "packed_sequence_lengths", *m.packed_sequence_lengths);
  if (m.packing) {
    begin_section(e, "packing");
    e << YAML::Key << "seed" << YAML::Value << m.packing->seed;
    put_int(e, "num_sequences", m.packing->num_sequences);
    put_int(e, "min_length", m.packing->min_length);
    put_int(e, "max_length", m.packing->max_length);
    e << YAML::EndMap;
  }
  if (m.pad_between_seqs) put_bool(e, "pad_between_seqs", *m.pad_between_seqs);
  else if (m.qkv_format == QkvFormat::thd) put_str(e, "pad_between_seqs", "auto");
}

void emit_model(YAML::Emitter& e, const ModelConfig& m) {
  begin_section(e, "model");
  put_int(e, "num_attention_heads", m.num_attention_heads);
  put_int(e, "num_query_groups", m.num_query_groups);
  put_int(e, "kv_channels", m.kv_channels);
  put_int(e, "kv_channels_v", m.kv_channels_v);
  put_int(e, "seq_length", m.seq_length);
  put_int(e, "micro_batch_size", m.micro_batch_size);
  put_int(e, "num_layers", m.num_layers);
  if (m.hidden_size) put_int(e, "hidden_size", *m.hidden_size);
  if (m.ffn_hidden_size) put_int(e, "ffn_hidden_size", *m.ffn_hidden_size);
  put_str(e, "attn_mask_type", to_string(m.attn_mask_type));
  put_str(e, "qkv_format", to_string(m.qkv_format));
  emit_packed_sequences(e, m);
  put_str(e, "attention_backend", to_string(m.attention_backend));
  if (m.window_size) put_int_list(e, "window_size", *m.window_size);
  put_bool(e, "attention_bias", m.attention_bias);
  put_str(e, "params_dtype", to_string(m.params_dtype));
  if (m.global_batch_size) put_int(e, "global_batch_size", *m.global_batch_size);
  if (m.vocab_size) put_int(e, "vocab_size", *m.vocab_size);
  put_bool(e, "gated_linear_unit", m.gated_linear_unit);
  put_bool(e, "untie_embeddings_and_output_weights", m.untie_embeddings_and_output_weights);
  e << YAML::EndMap;
}

void emit_parallel(YAML::Emitter& e, const ParallelConfig& p) {
  begin_section(e, "parallel");
  put_int(e, "tensor_model_parallel_size", p.tensor_model_parallel_size);
  put_int(e, "pipeline_model_parallel_size", p.pipeline_model_parallel_size);
  put_int(e, "context_parallel_size", p.context_parallel_size);
  if (p.data_parallel_size) put_int(e, "data_parallel_size", *p.data_parallel_size);
  e << YAML::Key << "cp_comm_type" << YAML::Value;
  if (p.cp_comm_type.size() == 1) {
    e << to_string(p.cp_comm_type.front());
  } else {
    e << YAML::Flow << YAML::BeginSeq;
    for (const CpCommType t : p.cp_comm_type) e << to_string(t);
    e << YAML::EndSeq;
  }
  if (p.hierarchical_context_parallel_sizes)
    put_int_list(e, "hierarchical_context_parallel_sizes", *p.hierarchical_context_parallel_sizes);
  put_str(e, "order", p.order);
  put_bool(e, "use_decentralized_pg", p.use_decentralized_pg);
  if (p.te_version) put_str(e, "te_version", *p.te_version);
  put_bool(e, "sequence_parallel", p.sequence_parallel);
  if (p.virtual_pipeline_model_parallel_size)
    put_int(e, "virtual_pipeline_model_parallel_size", *p.virtual_pipeline_model_parallel_size);
  put_bool(e, "use_distributed_optimizer", p.use_distributed_optimizer);
  put_bool(e, "overlap_grad_reduce", p.overlap_grad_reduce);
  put_bool(e, "overlap_param_gather", p.overlap_param_gather);
  put_bool(e, "grad_reduce_in_fp32", p.grad_reduce_in_fp32);
  put_bool(e, "tp_comm_overlap", p.tp_comm_overlap);
  put_bool(e, "account_for_embedding_in_pipeline_split", p.account_for_embedding_in_pipeline_split);
  put_bool(e, "account_for_loss_in_pipeline_split", p.account_for_loss_in_pipeline_split);
  if (p.decoder_first_pipeline_num_layers)
    put_int(e, "decoder_first_pipeline_num_layers", *p.decoder_first_pipeline_num_layers);
  if (p.decoder_last_pipeline_num_layers)
    put_int(e, "decoder_last_pipeline_num_layers", *p.decoder_last_pipeline_num_layers);
  e << YAML::EndMap;
}

/// One efficiency table, a point per line ({head_dim, q_rows, kv_rows, causal, efficiency}).
void emit_table(YAML::Emitter& e, const char* key, const std::vector<EfficiencyPoint>& t) {
  e << YAML::Key << key << YAML::Value << YAML::BeginSeq;
  for (const auto& p : t) {
    e << YAML::Flow << YAML::BeginMap;
    put_int(e, "head_dim", p.head_dim);
    put_int(e, "q_rows", p.q_rows);
    put_int(e, "kv_rows", p.kv_rows);
    put_bool(e, "causal", p.causal);
    put_num(e, "efficiency", p.efficiency);
    e << YAML::EndMap;
  }
  e << YAML::EndSeq;
}

void emit_gpu(YAML::Emitter& e, const GpuSpec& g) {
  begin_section(e, "gpu");
  put_str(e, "name", g.name);
  put_unit(e, "peak_bf16_TFLOP_per_s", g.peak_bf16_flops_per_s, kTera);
  put_unit(e, "memory_GB", g.memory_bytes, kGiga);
  put_unit(e, "hbm_bandwidth_GB_per_s", g.hbm_bandwidth_bytes_per_s, kGiga);
  // The loader clears a direction's table when it reads its scalar efficiency, then reads the table: the
  // scalars come first, so a preset's table never survives under a written one or where none is written.
  put_num(e, "attn_fwd_efficiency", g.attn_fwd_efficiency);
  put_num(e, "attn_bwd_efficiency", g.attn_bwd_efficiency);
  put_unit(e, "kernel_launch_overhead_us", g.kernel_launch_overhead_s, kMicro);
  put_num(e, "compute_slowdown_during_comm", g.compute_slowdown_during_comm);
  if (!g.attn_fwd_table.empty()) emit_table(e, "attn_fwd_table", g.attn_fwd_table);
  if (!g.attn_bwd_table.empty()) emit_table(e, "attn_bwd_table", g.attn_bwd_table);
  put_unit(e, "peak_fp8_TFLOP_per_s", g.peak_fp8_flops_per_s, kTera);
  put_num(e, "gemm_efficiency_bf16", g.gemm_efficiency_bf16);
  put_num(e, "gemm_efficiency_fp8", g.gemm_efficiency_fp8);
  put_num(e, "fp8_split_accumulator_slowdown", g.fp8_split_accumulator_slowdown);
  put_int(e, "sm_count", g.sm_count);
  put_bool(e, "attn_wave_quantization", g.attn_wave_quantization);
  e << YAML::EndMap;
}

void emit_link(YAML::Emitter& e, const char* key, const LinkSpec& l) {
  begin_section(e, key);
  put_unit(e, "bandwidth_GB_per_s", l.bandwidth_bytes_per_s, kGiga);
  put_unit(e, "latency_us", l.latency_s, kMicro);
  e << YAML::EndMap;
}

void emit_fabric(YAML::Emitter& e, const FabricSpec& f) {
  begin_section(e, "fabric");
  put_str(e, "kind", to_string(f.kind));
  put_int(e, "leaf_downlinks", f.leaf_downlinks);
  put_int(e, "spines", f.spines);
  put_num(e, "oversubscription", f.oversubscription);
  e << YAML::EndMap;
}

/// cluster.topology: vertices by name; links name their ends (the loader looks the names up).
void emit_topology(YAML::Emitter& e, const ExplicitTopology& t) {
  begin_section(e, "topology");
  e << YAML::Key << "vertices" << YAML::Value << YAML::BeginSeq;
  for (const auto& v : t.vertices) {
    e << YAML::Flow << YAML::BeginMap;
    put_str(e, "name", v.name);
    put_str(e, "kind", v.kind);
    if (v.node != -1) put_int(e, "node", v.node);  // −1 (a switch outside any node) is the loader's default
    e << YAML::EndMap;
  }
  e << YAML::EndSeq;
  e << YAML::Key << "links" << YAML::Value << YAML::BeginSeq;
  const auto name_of = [&t](int64_t i) { return t.vertices.at(static_cast<size_t>(i)).name; };
  for (const auto& l : t.links) {
    e << YAML::Flow << YAML::BeginMap;
    put_str(e, "a", name_of(l.a));
    put_str(e, "b", name_of(l.b));
    put_unit(e, "bandwidth_GB_per_s", l.bandwidth_bytes_per_s, kGiga);
    put_unit(e, "latency_us", l.latency_s, kMicro);
    e << YAML::EndMap;
  }
  e << YAML::EndSeq;
  e << YAML::EndMap;
}

void emit_cluster(YAML::Emitter& e, const ClusterSpec& c) {
  begin_section(e, "cluster");
  if (!c.preset.empty()) put_str(e, "preset", c.preset);
  put_int(e, "nodes", c.nodes);
  put_int(e, "gpus_per_node", c.gpus_per_node);
  emit_gpu(e, c.gpu);
  emit_link(e, "nvlink", c.nvlink);
  emit_link(e, "network", c.network);
  put_unit(e, "message_latency_us", c.message_latency_s, kMicro);
  if (c.nics_per_node >= 1) put_int(e, "nics_per_node", c.nics_per_node);
  emit_fabric(e, c.fabric);
  if (!c.topology.vertices.empty()) emit_topology(e, c.topology);
  e << YAML::EndMap;
}

void emit_training(YAML::Emitter& e, const TrainingConfig& t) {
  begin_section(e, "training");
  put_str(e, "recompute_granularity", to_string(t.recompute_granularity));
  // Only when they differ from the default (uniform groups of one layer), so older effective YAML stays the same.
  if (t.recompute_method != RecomputeMethod::uniform) put_str(e, "recompute_method", to_string(t.recompute_method));
  if (t.recompute_num_layers) put_int(e, "recompute_num_layers", *t.recompute_num_layers);
  put_bool(e, "fp8", t.fp8);
  if (t.fp8_recipe != Fp8Recipe::delayed) put_str(e, "fp8_recipe", to_string(t.fp8_recipe));
  if (t.fp8_param_gather) put_bool(e, "fp8_param_gather", true);
  put_unit(e, "framework_overhead_GB", t.framework_overhead_bytes, kGiga);
  e << YAML::EndMap;
}

void emit_oracle(YAML::Emitter& e, const OracleSpec& o) {
  begin_section(e, "oracle");
  e << YAML::Key << "seed" << YAML::Value << o.seed;
  put_str(e, "dtype", to_string(o.dtype));
  put_str(e, "input_distribution", o.input_distribution);
  put_str(e, "heads", o.heads);
  if (o.inject) put_str(e, "inject", *o.inject);
  e << YAML::EndMap;
}

/// expect: only the blocks that hold a value (an empty `expect: {}` still marks the block present).
void emit_expect(YAML::Emitter& e, const ExpectSpec& x) {
  begin_section(e, "expect");
  if (x.validate_exit_code || x.validate_error) {
    begin_section(e, "validate");
    if (x.validate_exit_code) put_int(e, "exit_code", *x.validate_exit_code);
    if (x.validate_error) put_str(e, "error", *x.validate_error);
    e << YAML::EndMap;
  }
  if (x.verify_result || !x.verify_max_rel_l2.empty()) {
    begin_section(e, "verify");
    if (x.verify_result) put_str(e, "result", *x.verify_result);
    if (!x.verify_max_rel_l2.empty()) {
      begin_section(e, "max_rel_l2");
      for (const auto& [tensor, bound] : x.verify_max_rel_l2) {  // NaN: the tensor must be non-finite (.nan)
        if (std::isnan(bound)) put_str(e, tensor.c_str(), ".nan");
        else put_num(e, tensor.c_str(), bound);
      }
      e << YAML::EndMap;
    }
    e << YAML::EndMap;
  }
  if (!x.simulate.empty()) {
    begin_section(e, "simulate");
    for (const auto& [field, value] : x.simulate) put_int(e, field.c_str(), value);
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
}

}  // namespace

std::string to_yaml(const Scenario& scenario) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  put_int(e, "schema_version", scenario.schema_version);
  put_str(e, "name", scenario.name);
  emit_model(e, scenario.model);
  emit_parallel(e, scenario.parallel);
  emit_cluster(e, scenario.cluster);
  emit_training(e, scenario.training);
  emit_oracle(e, scenario.oracle);
  if (scenario.expect.present) emit_expect(e, scenario.expect);
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace hcpsim
