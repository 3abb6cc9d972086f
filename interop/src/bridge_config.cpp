// Megatron-Bridge ConfigContainer YAML → MegatronConfig: one reader per section (model, train, ddp/optimizer,
// dist, tokenizer, mixed_precision); every key hcpsim does not model is listed as ignored.
// Source: Megatron-Bridge docs/megatron-lm-to-megatron-bridge.md (the flag → config-key mapping).
#include <yaml-cpp/yaml.h>

#include <map>
#include <utility>
#include <vector>

#include "hcpsim/config/megatron_defaults.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/core/types.hpp"
#include "hcpsim/interop/megatron_import.hpp"
#include "input_names.hpp"

namespace hcpsim {
namespace {

// Bounds on the keys listed as ignored. A Bridge config nests a few levels and holds a few hundred keys; without
// them an alias that refers to its own map (`a: &x {b: *x}`) recursed until the stack overflowed, and maps of
// aliases to maps (the "billion laughs") would list billions of keys.
constexpr int kMaxIgnoredDepth = 64;
constexpr size_t kMaxIgnoredKeys = 100000;

/// Parses the text; @throws InputError at the syntax error's file:line:col, or when there is no `model:` section.
YAML::Node load_bridge_yaml(const std::string& text, SourceLoc where) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    where.line = e.mark.line + 1;
    where.column = e.mark.column + 1;
    throw InputError(where, "", "not valid YAML: " + e.msg, "fix the YAML syntax at this position");
  }
  if (!root.IsMap() || !root["model"])
    throw InputError(where, "model", "not a Megatron-Bridge config: no 'model:' section",
                     "pass a ConfigContainer YAML (sections model:, train:, ddp:, dist:, ...)");
  return root;
}

/// Applies Bridge-style overrides ("a.b=value") to `root` in order; returns each dotted key → its last override's
/// text. @throws InputError at the override for a missing '=', an empty key component, a path through a value
/// that is not a section, or a value that is not YAML.
std::map<std::string, std::string> apply_bridge_overrides(YAML::Node& root, const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> set;
  for (const std::string& o : overrides) {
    SourceLoc at;
    at.override_text = o;
    // Hydra's grammar, which Bridge's scripts parse overrides with: "+key=v" adds a key, "++key=v" adds or
    // replaces one (both set it here), "~key" deletes one.
    const size_t plus = o.rfind("++", 0) == 0 ? 2 : o.rfind('+', 0) == 0 ? 1 : 0;
    const bool remove = plus == 0 && o.rfind('~', 0) == 0;
    const std::string body = o.substr(plus + (remove ? 1 : 0));
    const auto eq = body.find('=');
    if ((eq == std::string::npos && !remove) || eq == 0 || body.empty())
      throw InputError(at, "", "an override must look like section.key=value (or ~section.key to delete one)",
                       "e.g. model.context_parallel_size=8");
    const std::string key = body.substr(0, eq);
    std::vector<std::string> parts;
    for (size_t from = 0;;) {
      const size_t dot = key.find('.', from);
      parts.push_back(key.substr(from, dot == std::string::npos ? std::string::npos : dot - from));
      if (parts.back().empty())
        throw InputError(at, key, "empty component in key path", "write dotted keys such as model.seq_length");
      if (dot == std::string::npos) break;
      from = dot + 1;
    }
    YAML::Node value;
    try {
      if (!remove) value = YAML::Load(body.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      throw InputError(at, key, "value is not valid YAML: " + e.msg, "quote lists, e.g. \"" + key + "=[2,2]\"");
    }
    // Walk by copies of handles (yaml-cpp's operator= on a handle would rebind it, not assign through it).
    std::vector<YAML::Node> path{root};
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      YAML::Node next = path.back()[parts[i]];
      if (next && !next.IsMap() && !next.IsNull())
        throw InputError(at, key, "'" + parts[i] + "' is not a section", "override a key inside a section");
      if (!next || next.IsNull()) {
        path.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
        next = path.back()[parts[i]];
      }
      path.push_back(next);
    }
    if (remove)
      path.back().remove(parts.back());  // a key that is not there: nothing to delete
    else
      path.back()[parts.back()] = value;
    set[key] = o;
  }
  return set;
}

/// A value as written: the scalar, "null", or a sequence/map in YAML flow style.
std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsNull()) return std::string("null");
  YAML::Emitter e;
  e << YAML::Flow << n;
  return std::string(e.c_str());
}

/// Null in YAML or in the Python spellings a dumped config may hold.
bool is_null(const YAML::Node& n) {
  return n.IsNull() || (n.IsScalar() && (n.Scalar() == "null" || n.Scalar() == "None" || n.Scalar() == "~"));
}

/// The integer keys of `model:`: Bridge key → Megatron argument name (for line numbers and messages).
const std::map<std::string, std::string> kModelInts{
    {"num_attention_heads", "num_attention_heads"}, {"num_query_groups", "num_query_groups"},
    {"kv_channels", "kv_channels"}, {"seq_length", "seq_length"}, {"hidden_size", "hidden_size"},
    {"ffn_hidden_size", "ffn_hidden_size"}, {"num_layers", "num_layers"}, {"vocab_size", "vocab_size"},
    {"tensor_model_parallel_size", "tensor_model_parallel_size"},
    {"pipeline_model_parallel_size", "pipeline_model_parallel_size"},
    {"virtual_pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size"},
    {"context_parallel_size", "context_parallel_size"}};

/// Reads the sections of one ConfigContainer into a MegatronConfig, recording each value's line and column under
/// the Megatron argument name it stands for.
class BridgeReader {
 public:
  BridgeReader(SourceLoc file, MegatronConfig c, std::map<std::string, std::string> overridden)
      : file_(std::move(file)), c_(std::move(c)), overridden_(std::move(overridden)) {}

  void read(const YAML::Node& root) {
    for (auto sec = root.begin(); sec != root.end(); ++sec) {
      const std::string section = key_text(sec->first, "");
      const YAML::Node m = sec->second;
      if (section == "mixed_precision") {
        read_mixed_precision(m);
      } else if (!m.IsMap()) {
        if (!section.empty() && section[0] != '_') ignore(section, m);
      } else {
        read_section(section, m);
      }
    }
    check_dataset_seq_length(root);
  }

  /// Applies TransformerConfig's defaults for what the config left unset and returns the result.
  MegatronConfig finish() {
    c_.params_dtype = bf16_ ? "bf16" : fp16_ ? "fp16" : "fp32";
    // Bridge's TransformerConfig: num_query_groups null means MHA; kv_channels null means hidden / heads.
    if (!c_.num_query_groups) c_.num_query_groups = c_.num_attention_heads;
    if (!c_.kv_channels && c_.hidden_size && c_.num_attention_heads && *c_.num_attention_heads > 0) {
      c_.kv_channels = default_kv_channels(*c_.hidden_size, *c_.num_attention_heads);
      c_.notes.push_back("kv_channels not set: hidden_size / num_attention_heads = " +
                         std::to_string(*c_.kv_channels) + " (Megatron's rule)");
    }
    if (!c_.ffn_hidden_size && c_.hidden_size) {
      c_.ffn_hidden_size =
          default_ffn_hidden_size(*c_.hidden_size, c_.gated_linear_unit, MegatronConfigSource::transformer_config);
      c_.notes.push_back("ffn_hidden_size not set: 4*hidden_size = " + std::to_string(*c_.ffn_hidden_size) +
                         " (TransformerConfig default)");
    }
    if (!c_.vocab_size)
      c_.notes.push_back("vocab_size not set: it comes from the tokenizer; model.vocab_size is left out");
    return std::move(c_);
  }

 private:
  SourceLoc loc(const YAML::Node& n) const {
    // A value an override set (or one below an overridden section) is located at that override.
    for (std::string k = current_key_; !k.empty(); k.resize(k.rfind('.') == std::string::npos ? 0 : k.rfind('.'))) {
      const auto it = overridden_.find(k);
      if (it == overridden_.end()) continue;
      SourceLoc o;
      o.override_text = it->second;
      return o;
    }
    SourceLoc l = file_;
    if (n.Mark().line >= 0 && !n.Mark().is_null()) {
      l.line = n.Mark().line + 1;
      l.column = n.Mark().column + 1;
    }
    return l;
  }

  /// Megatron-Bridge's ConfigContainer.validate asserts model.seq_length == the dataset's (sequence_length of a
  /// GPTDatasetConfig, seq_length of a FinetuningDatasetConfig). @throws InputError at the dataset's key.
  void check_dataset_seq_length(const YAML::Node& root) {
    const YAML::Node d = root["dataset"];
    if (!d || !d.IsMap() || !c_.seq_length) return;
    for (const char* k : {"sequence_length", "seq_length"}) {
      const YAML::Node v = d[k];
      if (!v || is_null(v)) continue;
      const std::string key = std::string("dataset.") + k;
      current_key_ = key;  // loc() names its override when one set it
      const int64_t x = as_int(v, key);
      if (x != *c_.seq_length)
        throw InputError(loc(v), key,
                         std::to_string(x) + " differs from model.seq_length " + std::to_string(*c_.seq_length) +
                             ": Megatron-Bridge's ConfigContainer.validate asserts that they match",
                         "set both to the sequence length the run trains with");
    }
  }

  /// Records where the Megatron argument `name` was set.
  void mark(const std::string& name, const YAML::Node& n) {
    c_.lines[name] = loc(n).line;
    c_.columns[name] = loc(n).column;
    const SourceLoc l = loc(n);
    c_.source_keys[name] = l.override_text.empty() ? current_key_ : "override '" + l.override_text + "'";
  }

  int64_t as_int(const YAML::Node& n, const std::string& key) const {
    const std::string s = n.IsScalar() ? n.Scalar() : "";
    try {
      size_t pos = 0;
      const long long v = std::stoll(s, &pos, 10);
      if (pos == s.size()) return v;
    } catch (const std::exception&) {
    }
    throw InputError(loc(n), key, "expected an integer, got '" + scalar_text(n) + "'", "write a whole number");
  }

  bool as_bool(const YAML::Node& n, const std::string& key) const {
    const std::string s = n.IsScalar() ? n.Scalar() : "";
    if (s == "true" || s == "True") return true;
    if (s == "false" || s == "False") return false;
    throw InputError(loc(n), key, "expected true or false, got '" + scalar_text(n) + "'", "write true or false");
  }

  /// A scalar that must be one of two words (Megatron's argparse choices for the key), as written.
  /// @throws InputError at the value: "unknown <what> '<value>'", fix "use <first>, <second> or null".
  std::string as_choice(const YAML::Node& n, const std::string& key, const std::string& what, const char* first,
                        const char* second) const {
    const std::string s = scalar_text(n);
    if (s != first && s != second)
      throw InputError(loc(n), key, "unknown " + what + " '" + s + "'",
                       std::string("use ") + first + ", " + second + " or null");
    return s;
  }

  /// A map key as text: a scalar, or "null" for an empty key (what yaml-cpp's string conversion gives).
  /// @throws InputError at the key for a sequence or map used as a key (`? [a, b]: 1`).
  std::string key_text(const YAML::Node& k, const std::string& parent) const {
    if (k.IsScalar()) return k.Scalar();
    if (k.IsNull()) return "null";
    throw InputError(loc(k), parent, "a key must be a plain name, not a " +
                                         std::string(k.IsSequence() ? "sequence" : "map"),
                     "write `name: value`");
  }

  /// Lists a value (every leaf of a map) as ignored, "key.path: value".
  /// @throws InputError naming the key beyond kMaxIgnoredDepth levels or kMaxIgnoredKeys keys.
  void ignore(const std::string& key, const YAML::Node& n, int depth = 0) {
    if (depth > kMaxIgnoredDepth)
      throw InputError(loc(n), key, "nested more than " + std::to_string(kMaxIgnoredDepth) +
                                        " levels deep (an alias that refers to its own map?)",
                       "remove the alias, or flatten the section");
    if (c_.ignored.size() >= kMaxIgnoredKeys)
      throw InputError(loc(n), key, "more than " + std::to_string(kMaxIgnoredKeys) +
                                        " keys that hcpsim does not model (aliases repeating a map?)",
                       "remove the aliases, or the sections hcpsim does not read");
    if (n.IsMap()) {
      for (auto it = n.begin(); it != n.end(); ++it) {
        const std::string k = key_text(it->first, key);
        if (!k.empty() && k[0] == '_') continue;  // `_target_` and similar Hydra metadata
        ignore(key + "." + k, it->second, depth + 1);
      }
      return;
    }
    c_.ignored.push_back(key + ": " + scalar_text(n));
  }

  /// `mixed_precision:` is a recipe name ("bf16_mixed", ...) or a map of bf16/fp16/fp8 settings.
  void read_mixed_precision(const YAML::Node& m) {
    current_key_ = "mixed_precision";
    if (m.IsScalar() && !is_null(m)) {
      // Source: Megatron-Bridge mixed_precision recipes: "bf16_mixed", "fp16_mixed", "bf16_with_fp8_..._mixed".
      const std::string s = m.Scalar();
      bf16_ = s.rfind("bf16", 0) == 0;
      fp16_ = s.rfind("fp16", 0) == 0;
      if (s.find("fp8") != std::string::npos) c_.fp8 = true;
      // Source: Megatron-Bridge training/mixed_precision.py: the FP8 recipes set fp8_param_gather = True;
      // bf16_with_fp8_current_scaling_mixed uses fp8_recipe "tensorwise", the delayed-scaling ones "delayed".
      if (c_.fp8 && s.find("current_scaling") != std::string::npos) c_.fp8_recipe = "tensorwise";
      else if (c_.fp8 && s.find("delayed_scaling") != std::string::npos) c_.fp8_recipe = "delayed";
      if (c_.fp8_recipe) {
        c_.fp8_param_gather = true;
        mark("fp8_recipe", m);
        mark("fp8_param_gather", m);
      }
      mark("bf16", m);
      mark("fp16", m);
      if (c_.fp8) mark("fp8_format", m);
    } else if (m.IsMap()) {
      for (auto it = m.begin(); it != m.end(); ++it) {
        const std::string k = key_text(it->first, "mixed_precision");
        current_key_ = "mixed_precision." + k;
        if (k == "bf16") bf16_ = as_bool(it->second, "mixed_precision.bf16");
        else if (k == "fp16") fp16_ = as_bool(it->second, "mixed_precision.fp16");
        else if (k == "fp8") c_.fp8 = c_.fp8 || !is_null(it->second);
        else if (k == "fp8_recipe" && !is_null(it->second))
          c_.fp8_recipe = as_choice(it->second, "mixed_precision.fp8_recipe", "FP8 recipe", "delayed", "tensorwise");
        else if (k == "fp8_param_gather") c_.fp8_param_gather = !is_null(it->second) && as_bool(it->second, "mixed_precision.fp8_param_gather");
        else if (!k.empty() && k[0] != '_') ignore("mixed_precision." + k, it->second);
        if (k == "bf16" || k == "fp16") mark(k, it->second);
        if (k == "fp8") mark("fp8_format", it->second);
        if (k == "fp8_recipe" || k == "fp8_param_gather") mark(k, it->second);
      }
    }
  }

  /// One map section: each key is read by its section's reader or listed as ignored.
  void read_section(const std::string& section, const YAML::Node& m) {
    for (auto it = m.begin(); it != m.end(); ++it) {
      const std::string k = key_text(it->first, section);
      const std::string key = section + "." + k;
      const YAML::Node v = it->second;  // a handle: the iterator yields a temporary
      if (!k.empty() && k[0] == '_') continue;
      current_key_ = key;
      if (read_key(section, k, key, v)) continue;
      if (section == "model") refuse_misspelled_model_key(m, k, key, it->first);
      ignore(key, v);
    }
  }

  /// A model key that misspells one hcpsim reads and the section does not hold (interop::misspelled_name:
  /// model.contex_parallel_size): listed as ignored, the setting silently took its default. A Bridge
  /// TransformerConfig refuses an unknown field.
  /// @throws InputError at the key, naming the key it resembles.
  void refuse_misspelled_model_key(const YAML::Node& section, const std::string& k, const std::string& key,
                                   const YAML::Node& at) const {
    // The integer keys (kModelInts) and the others read_model_key reads.
    static const std::vector<std::string> kRead = [] {
      std::vector<std::string> names;
      for (const auto& [name, megatron] : kModelInts) names.push_back(name);
      for (const char* other :
           {"cp_comm_type", "hierarchical_context_parallel_sizes", "sequence_parallel",
            "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
            "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage", "gated_linear_unit",
            "share_embeddings_and_output_weights", "recompute_granularity", "attention_backend", "recompute_method",
            "recompute_num_layers"})
        names.emplace_back(other);
      return names;
    }();
    const std::string known =
        interop::misspelled_name(k, kRead, [&](const std::string& name) { return static_cast<bool>(section[name]); });
    if (!known.empty())
      throw InputError(loc(at), key,
                       "unknown key; did you mean model." + known + "? (a Bridge config refuses an unknown field)",
                       "spell it model." + known);
  }

  /// Reads `section.k` (full name `key`); false when hcpsim does not model it.
  bool read_key(const std::string& section, const std::string& k, const std::string& key, const YAML::Node& v) {
    if (section == "model") return read_model_key(k, key, v);
    if (section == "train" && (k == "micro_batch_size" || k == "global_batch_size")) {
      if (!is_null(v)) {
        (k == "micro_batch_size" ? c_.micro_batch_size : c_.global_batch_size.emplace()) = as_int(v, key);
        mark(k, v);
      }
      return true;
    }
    if ((section == "ddp" || section == "optimizer") && k == "use_distributed_optimizer") {
      c_.use_distributed_optimizer = c_.use_distributed_optimizer || as_bool(v, key);
      mark(k, v);
      return true;
    }
    if (section == "ddp" && k == "grad_reduce_in_fp32") {
      if (!is_null(v)) c_.grad_reduce_in_fp32 = as_bool(v, key);
      mark(k, v);
      return true;
    }
    if (section == "ddp" && (k == "overlap_grad_reduce" || k == "overlap_param_gather")) {
      (k == "overlap_grad_reduce" ? c_.overlap_grad_reduce : c_.overlap_param_gather) = as_bool(v, key);
      mark(k, v);
      return true;
    }
    if (section == "comm_overlap" && k == "tp_comm_overlap") {
      c_.tp_comm_overlap = !is_null(v) && as_bool(v, key);
      mark(k, v);
      return true;
    }
    if (section == "dist" && k == "use_decentralized_pg") {
      c_.use_decentralized_pg = as_bool(v, key);
      mark(k, v);
      return true;
    }
    if (section == "tokenizer" && k == "vocab_size" && !c_.vocab_size && !is_null(v)) {
      c_.vocab_size = as_int(v, key);
      mark("vocab_size", v);
      return true;
    }
    return false;
  }

  /// `model.k` (TransformerConfig / GPTModelProvider names); false when hcpsim does not model it.
  bool read_model_key(const std::string& k, const std::string& key, const YAML::Node& v) {
    if (read_model_int(k, key, v)) return true;
    if (k == "cp_comm_type") {
      read_cp_comm_type(key, v);
    } else if (k == "hierarchical_context_parallel_sizes") {
      mark(k, v);
      if (!is_null(v)) {
        if (!v.IsSequence())
          throw InputError(loc(v), key, "expected a list of integers", "write e.g. '" + k + ": [8, 2]'");
        std::vector<int64_t> sizes;
        for (size_t i = 0; i < v.size(); ++i) sizes.push_back(as_int(v[i], key));
        c_.hierarchical_context_parallel_sizes = sizes;
      }
    } else if (k == "sequence_parallel") {
      c_.sequence_parallel = as_bool(v, key);
      mark(k, v);
    } else if (k == "account_for_embedding_in_pipeline_split" || k == "account_for_loss_in_pipeline_split") {
      (k == "account_for_embedding_in_pipeline_split" ? c_.account_for_embedding_in_pipeline_split
                                                       : c_.account_for_loss_in_pipeline_split) = as_bool(v, key);
      mark(k, v);
    } else if (k == "num_layers_in_first_pipeline_stage" || k == "num_layers_in_last_pipeline_stage") {
      // TransformerConfig's names for Megatron's --decoder-first/last-pipeline-num-layers.
      const bool first = k == "num_layers_in_first_pipeline_stage";
      mark(first ? "decoder_first_pipeline_num_layers" : "decoder_last_pipeline_num_layers", v);
      if (!is_null(v))
        (first ? c_.decoder_first_pipeline_num_layers : c_.decoder_last_pipeline_num_layers) = as_int(v, key);
    } else if (k == "gated_linear_unit") {
      c_.gated_linear_unit = as_bool(v, key);
      mark("swiglu", v);
    } else if (k == "share_embeddings_and_output_weights") {
      // Source: Bridge mapping: --untie-embeddings-and-output-weights ↔ share_embeddings_and_output_weights=false.
      c_.untie_embeddings_and_output_weights = !as_bool(v, key);
      mark("untie_embeddings_and_output_weights", v);
    } else if (k == "recompute_granularity") {
      mark(k, v);
      if (!is_null(v)) c_.recompute_granularity = as_choice(v, key, "recompute granularity", "full", "selective");
    } else if (k == "fp8") {
      c_.fp8 = c_.fp8 || !is_null(v);
      mark("fp8_format", v);
    } else if (k == "bf16" || k == "fp16") {
      (k == "bf16" ? bf16_ : fp16_) = as_bool(v, key);
      mark(k, v);
    } else if (k == "attention_backend") {
      mark(k, v);
      if (!is_null(v)) read_attention_backend(key, v);
    } else if (k == "recompute_method") {
      mark(k, v);
      if (!is_null(v)) c_.recompute_method = as_choice(v, key, "recompute method", "uniform", "block");
    } else if (k == "recompute_num_layers") {
      mark(k, v);
      if (!is_null(v)) c_.recompute_num_layers = as_int(v, key);
    } else if (interop::unmodelled_setting(k, scalar_text(v), true)) {
      // A Bridge dump prints every TransformerConfig field, so only the switches that turn a feature on count.
      c_.unmodelled.push_back(key + ": " + scalar_text(v));
    } else {
      return false;
    }
    return true;
  }

  /// model.attention_backend (Megatron's AttnBackend; a dump may print "AttnBackend.flash"): auto, flash and
  /// fused are modelled. @throws InputError for unfused and local, which have no context parallelism.
  void read_attention_backend(const std::string& key, const YAML::Node& v) {
    std::string b = scalar_text(v);
    if (b.rfind("AttnBackend.", 0) == 0) b = b.substr(12);
    if (b != "auto" && b != "flash" && b != "fused")
      throw InputError(loc(v), key,
                       "attention backend '" + b + "' is not modelled: hcpsim times TE's FlashAttention and cuDNN "
                       "fused attention (auto, flash, fused); unfused and local attention do not support context "
                       "parallelism",
                       "use auto, flash or fused");
    c_.attention_backend = b;
  }

  /// The integer sizes of `model:` (null leaves the field unset); false when `k` is not one of them.
  bool read_model_int(const std::string& k, const std::string& key, const YAML::Node& v) {
    auto ints = kModelInts.find(k);
    if (ints == kModelInts.end()) return false;
    if (is_null(v)) return true;
    const int64_t x = as_int(v, key);
    mark(ints->second, v);
    if (k == "num_attention_heads") c_.num_attention_heads = x;
    else if (k == "num_query_groups") c_.num_query_groups = x;
    else if (k == "kv_channels") c_.kv_channels = x;
    else if (k == "seq_length") c_.seq_length = x;
    else if (k == "hidden_size") c_.hidden_size = x;
    else if (k == "ffn_hidden_size") c_.ffn_hidden_size = x;
    else if (k == "num_layers") c_.num_layers = x;
    else if (k == "vocab_size") c_.vocab_size = x;
    else if (k == "tensor_model_parallel_size") c_.tensor_model_parallel_size = x;
    else if (k == "pipeline_model_parallel_size") c_.pipeline_model_parallel_size = x;
    else if (k == "virtual_pipeline_model_parallel_size") c_.virtual_pipeline_model_parallel_size = x;
    else if (k == "context_parallel_size") c_.context_parallel_size = x;
    return true;
  }

  /// `model.cp_comm_type`: one value or one per layer; "allgather" is TE's all_gather.
  void read_cp_comm_type(const std::string& key, const YAML::Node& v) {
    mark("cp_comm_type", v);
    if (is_null(v)) return;
    std::vector<std::string> items;
    if (v.IsSequence()) {
      for (size_t i = 0; i < v.size(); ++i) items.push_back(scalar_text(v[i]));
    } else {
      items.push_back(scalar_text(v));
    }
    for (auto& x : items) {
      if (x == "allgather") x = "all_gather";
      if (!parse_cp_comm_type(x))  // the spellings of core/types.hpp
        throw InputError(loc(v), key, "unknown cp_comm_type '" + x + "'",
                         "use p2p, a2a, a2a+p2p or allgather (Megatron's spelling of TE's all_gather, which a scenario "
                         "file spells all_gather; one value, or one per layer)");
    }
    c_.cp_comm_type = items;
  }

  SourceLoc file_;  ///< the input file, no line: the location of a value without a mark
  MegatronConfig c_;
  std::map<std::string, std::string> overridden_;  ///< dotted key → the override that set it
  std::string current_key_;  ///< the config key being read, as written ("model.gated_linear_unit"), for mark()
  bool bf16_ = false;
  bool fp16_ = false;
};

}  // namespace

MegatronConfig parse_bridge_config(const std::string& text, const std::string& display_name,
                                   const std::vector<std::string>& overrides) {
  SourceLoc where;
  where.file = interop::display(display_name);
  YAML::Node root = load_bridge_yaml(text, where);
  std::map<std::string, std::string> overridden = apply_bridge_overrides(root, overrides);

  MegatronConfig c;
  c.source_path = display_name;
  c.name = interop::scenario_name_of(display_name, "bridge_config");
  BridgeReader reader(where, std::move(c), std::move(overridden));
  reader.read(root);
  return reader.finish();
}

}  // namespace hcpsim
