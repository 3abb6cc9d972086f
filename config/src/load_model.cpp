// The `model:` section (attention shapes and whole-model sizes, Megatron TransformerConfig names) and the
// `training:` section (recomputation, FP8, framework memory) that says how that model is trained.
#include "scenario_sections.hpp"

namespace hcpsim {
namespace {

/// `model.packing` {seed, num_sequences, min_length, max_length}, every key required; the ranges are validation's
/// (thd_key_problem).
PackingGenerator read_packing(YamlReader& r, const YAML::Node& n) {
  const std::string P = "model.packing";
  r.check_map(n, P, {"seed", "num_sequences", "min_length", "max_length"});
  auto req = [&](const char* key) {
    if (!n[key])
      r.fail(n, P, std::string("missing required key '") + key + "'",
             "write e.g. 'packing: {seed: 1, num_sequences: 4, min_length: 100, max_length: 1000}'");
    return r.get_int(n[key], P + "." + key);
  };
  PackingGenerator g;
  const int64_t seed = req("seed");
  if (seed < 0) r.fail(n["seed"], P + ".seed", "must be >= 0", "use a non-negative integer data seed");
  g.seed = static_cast<uint64_t>(seed);
  g.num_sequences = req("num_sequences");
  g.min_length = req("min_length");
  g.max_length = req("max_length");
  return g;
}

/// The THD keys: the packed lengths or their generator, and pad_between_seqs (true | false | auto).
void read_packed_sequences(YamlReader& r, const YAML::Node& m, ModelConfig& mc) {
  const std::string P = "model";
  if (m["packed_sequence_lengths"] && !m["packed_sequence_lengths"].IsNull())
    mc.packed_sequence_lengths = r.get_int_list(m["packed_sequence_lengths"], P + ".packed_sequence_lengths");
  if (m["packing"] && !m["packing"].IsNull()) mc.packing = read_packing(r, m["packing"]);
  if (m["pad_between_seqs"]) {
    const YAML::Node& n = m["pad_between_seqs"];
    if (n.IsScalar() && n.Scalar() == "auto") mc.pad_between_seqs.reset();
    else if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "True" || n.Scalar() == "false" ||
                              n.Scalar() == "False"))
      mc.pad_between_seqs = r.get_bool(n, P + ".pad_between_seqs");
    else
      r.fail(n, P + ".pad_between_seqs", "expected true, false or auto", "write 'pad_between_seqs: auto' (the default)");
  }
}

}  // namespace

void read_model(YamlReader& r, const YAML::Node& m, ModelConfig& mc) {
  const std::string P = "model";
  r.check_map(m, P, kModelKeys);
  auto req = [&](const char* key) {
    if (!m[key]) r.fail(m, P, std::string("missing required key '") + key + "'", std::string("add 'model.") + key + ": <value>'");
    return r.get_int(m[key], P + "." + key);
  };
  // Upper bounds only: validation (validation.cpp) names the lower-bound and divisibility rules.
  auto at_most = [&](const char* key, const plausible::Range& range) {
    if (m[key] && static_cast<double>(r.get_int(m[key], P + "." + key)) > range.hi)
      (void)r.plausible_int(m[key], P + "." + key, range);
  };
  at_most("num_attention_heads", plausible::kHeads);
  at_most("num_query_groups", plausible::kHeads);
  at_most("kv_channels", plausible::kHeadDim);
  at_most("kv_channels_v", plausible::kHeadDim);
  mc.num_attention_heads = req("num_attention_heads");
  if (m["qkv_format"])
    mc.qkv_format = r.get_enum<QkvFormat>(m["qkv_format"], P + ".qkv_format", parse_qkv_format, "bshd, sbhd, thd");
  // With thd the packed total is derived when seq_length is absent or null (scenario_loader.cpp, once the CP size
  // is known).
  if (mc.qkv_format != QkvFormat::thd || (m["seq_length"] && !m["seq_length"].IsNull()))
    mc.seq_length = req("seq_length");
  mc.num_query_groups = m["num_query_groups"] ? r.get_int(m["num_query_groups"], P + ".num_query_groups")
                                              : mc.num_attention_heads;
  if (m["hidden_size"]) mc.hidden_size = r.get_int(m["hidden_size"], P + ".hidden_size");
  if (m["ffn_hidden_size"]) mc.ffn_hidden_size = r.get_int(m["ffn_hidden_size"], P + ".ffn_hidden_size");
  if (m["global_batch_size"] && !m["global_batch_size"].IsNull())
    mc.global_batch_size = r.get_int(m["global_batch_size"], P + ".global_batch_size");
  if (m["vocab_size"] && !m["vocab_size"].IsNull()) mc.vocab_size = r.get_int(m["vocab_size"], P + ".vocab_size");
  if (m["gated_linear_unit"]) mc.gated_linear_unit = r.get_bool(m["gated_linear_unit"], P + ".gated_linear_unit");
  if (m["untie_embeddings_and_output_weights"])
    mc.untie_embeddings_and_output_weights =
        r.get_bool(m["untie_embeddings_and_output_weights"], P + ".untie_embeddings_and_output_weights");
  if (m["kv_channels"]) {
    mc.kv_channels = r.get_int(m["kv_channels"], P + ".kv_channels");
  } else if (mc.hidden_size && mc.num_attention_heads > 0) {
    // Source: Megatron TransformerConfig: kv_channels defaults to hidden_size // num_attention_heads.
    mc.kv_channels = *mc.hidden_size / mc.num_attention_heads;
  } else {
    r.fail(m, P, "missing required key 'kv_channels'", "add 'model.kv_channels: <head dim>' (or hidden_size)");
  }
  mc.kv_channels_v = m["kv_channels_v"] ? r.get_int(m["kv_channels_v"], P + ".kv_channels_v") : mc.kv_channels;
  if (m["micro_batch_size"]) mc.micro_batch_size = r.get_int(m["micro_batch_size"], P + ".micro_batch_size");
  if (m["num_layers"]) mc.num_layers = r.get_int(m["num_layers"], P + ".num_layers");
  if (m["attn_mask_type"])
    mc.attn_mask_type = r.get_enum<AttnMaskType>(m["attn_mask_type"], P + ".attn_mask_type", parse_attn_mask_type,
                                                 "causal, no_mask");
  read_packed_sequences(r, m, mc);
  if (m["window_size"] && !m["window_size"].IsNull()) {
    mc.window_size = r.get_int_list(m["window_size"], P + ".window_size");
    if (mc.window_size->size() != 2)
      r.fail(m["window_size"], P + ".window_size", "expected two values [left, right]",
             "write e.g. 'window_size: [4096, 0]', or [-1, -1] for no window");
  }
  if (m["attention_bias"]) mc.attention_bias = r.get_bool(m["attention_bias"], P + ".attention_bias");
  if (m["params_dtype"])
    mc.params_dtype = r.get_enum<Dtype>(m["params_dtype"], P + ".params_dtype", parse_dtype, "bf16, fp16, fp32");
  if (m["attention_backend"])
    mc.attention_backend = r.get_enum<AttentionBackend>(m["attention_backend"], P + ".attention_backend",
                                                        parse_attention_backend, "auto, flash, fused");
  if (mc.params_dtype == Dtype::fp64)
    r.fail(m["params_dtype"], P + ".params_dtype", "fp64 is not a training dtype", "use bf16, fp16 or fp32");
}

void read_training(YamlReader& r, const YAML::Node& m, TrainingConfig& t) {
  const std::string P = "training";
  r.check_map(m, P, kTrainingKeys);
  if (m["recompute_granularity"]) {
    const std::string g = r.get_string(m["recompute_granularity"], P + ".recompute_granularity");
    if (g == "none") t.recompute_granularity = RecomputeGranularity::none;
    else if (g == "selective") t.recompute_granularity = RecomputeGranularity::selective;
    else if (g == "full") t.recompute_granularity = RecomputeGranularity::full;
    else
      r.fail(m["recompute_granularity"], P + ".recompute_granularity", "unknown value '" + g + "'",
             std::string("use one of: none, selective, full") +
                 (g == "partial" ? " (plan's partial recompute is full with recompute_method: block and "
                                   "recompute_num_layers: N)"
                                 : ""));
  }
  // null (as a Megatron-Bridge dump writes it, or an override `training.recompute_method=null`) leaves the
  // default: needed to switch a scenario that sets both keys to selective or no recompute.
  if (m["recompute_method"] && !m["recompute_method"].IsNull()) {
    const std::string g = r.get_string(m["recompute_method"], P + ".recompute_method");
    if (g == "uniform") t.recompute_method = RecomputeMethod::uniform;
    else if (g == "block") t.recompute_method = RecomputeMethod::block;
    else
      r.fail(m["recompute_method"], P + ".recompute_method", "unknown value '" + g + "'", "use uniform or block");
  }
  if (m["recompute_num_layers"] && !m["recompute_num_layers"].IsNull())
    t.recompute_num_layers = r.get_int(m["recompute_num_layers"], P + ".recompute_num_layers");
  if (m["fp8"]) t.fp8 = r.get_bool(m["fp8"], P + ".fp8");
  if (m["fp8_recipe"]) {
    const std::string g = r.get_string(m["fp8_recipe"], P + ".fp8_recipe");
    if (g == "delayed") t.fp8_recipe = Fp8Recipe::delayed;
    else if (g == "tensorwise") t.fp8_recipe = Fp8Recipe::tensorwise;
    else if (g == "mxfp8" || g == "blockwise")
      r.fail(m["fp8_recipe"], P + ".fp8_recipe", "Megatron's " + g + " recipe is not modelled",
             "use delayed or tensorwise (per-tensor current scaling)");
    else
      r.fail(m["fp8_recipe"], P + ".fp8_recipe", "unknown value '" + g + "'",
             "use delayed or tensorwise (Megatron --fp8-recipe)");
  }
  if (m["fp8_param_gather"]) t.fp8_param_gather = r.get_bool(m["fp8_param_gather"], P + ".fp8_param_gather");
  if (m["framework_overhead_GB"])
    t.framework_overhead_bytes =
        r.plausible(m["framework_overhead_GB"], P + ".framework_overhead_GB", plausible::kFrameworkMemory) * 1e9;
}

}  // namespace hcpsim
