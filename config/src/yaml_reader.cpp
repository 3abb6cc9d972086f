#include "yaml_reader.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "hcpsim/config/key_aliases.hpp"
#include "hcpsim/config/scenario_loader.hpp"

namespace hcpsim {

const std::vector<std::string> kModelKeys = {
    "num_attention_heads", "num_query_groups", "kv_channels", "kv_channels_v", "seq_length", "micro_batch_size",
    "num_layers", "hidden_size", "ffn_hidden_size", "attn_mask_type", "qkv_format", "window_size", "attention_bias",
    "params_dtype", "global_batch_size", "vocab_size", "gated_linear_unit", "untie_embeddings_and_output_weights",
    "attention_backend", "packed_sequence_lengths", "packing", "pad_between_seqs"};
const std::vector<std::string> kParallelKeys = {
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size", "data_parallel_size",
    "cp_comm_type", "hierarchical_context_parallel_sizes", "order", "use_decentralized_pg", "te_version",
    "sequence_parallel", "virtual_pipeline_model_parallel_size", "use_distributed_optimizer", "overlap_grad_reduce",
    "overlap_param_gather", "grad_reduce_in_fp32", "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split", "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
    "tp_comm_overlap"};
const std::vector<std::string> kClusterKeys = {"preset", "nodes", "gpus_per_node", "gpu", "nvlink", "network",
                                               "message_latency_us", "nics_per_node", "fabric", "topology"};
const std::vector<std::string> kTrainingKeys = {"recompute_granularity", "recompute_method", "recompute_num_layers",
                                                "fp8", "fp8_recipe", "fp8_param_gather",
                                                "framework_overhead_GB"};
const std::vector<std::string> kOracleKeys = {"seed", "dtype", "input_distribution", "heads", "inject"};

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

namespace {

/// "section.key" when `key`, written at the top level, is a key of one of the sections (a Megatron user's
/// `context_parallel_size=8`, or `context-parallel-size`); "" otherwise.
std::string section_of_top_level_key(const std::string& key) {
  std::string k = key;
  std::replace(k.begin(), k.end(), '-', '_');
  for (const auto& [section, keys] :
       {std::pair<const char*, const std::vector<std::string>*>{"model", &kModelKeys},
        {"parallel", &kParallelKeys}, {"cluster", &kClusterKeys}, {"training", &kTrainingKeys},
        {"oracle", &kOracleKeys}})
    if (std::find(keys->begin(), keys->end(), k) != keys->end()) return std::string(section) + "." + k;
  return "";
}

/// The fix for an unknown `key` under `path`: the section it belongs in, the nearest allowed key, or the list
/// of allowed keys.
std::string unknown_key_fix(const std::string& path, const std::string& key, const std::vector<std::string>& allowed) {
  std::string best;
  int best_d = std::numeric_limits<int>::max();
  for (const auto& a : allowed) {
    int d = edit_distance(key, a);
    if (d < best_d) { best_d = d; best = a; }
  }
  const std::string section_key = path.empty() ? section_of_top_level_key(key) : "";
  if (!section_key.empty())
    return "did you mean '" + section_key + "'? (keys live in sections; as an override: " + section_key + "=...)";
  if (best_d <= std::max<int>(2, static_cast<int>(key.size()) / 3)) return "did you mean '" + join_path(path, best) + "'?";
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  return "remove it; keys allowed under '" + (path.empty() ? std::string("<top level>") : path) + "': " + list;
}

}  // namespace

YamlReader::YamlReader(std::string file, std::map<std::string, std::string> overridden,
                       std::map<std::string, SourceLoc>& locations)
    : file_(std::move(file)), overridden_(std::move(overridden)), locations_(locations) {}

SourceLoc YamlReader::loc(const YAML::Node& n, const std::string& path) const {
  // An overridden value (or a value below an overridden key) points at the override text.
  std::string k = path;
  while (!k.empty()) {
    auto it = overridden_.find(k);
    if (it != overridden_.end()) {
      SourceLoc l;
      l.override_text = it->second;
      return l;
    }
    auto dot = k.rfind('.');
    if (dot == std::string::npos) break;
    k.resize(dot);
  }
  // A key that only an override created (it has no place in the file) points at that override.
  const bool in_file = n.IsDefined() && n.Mark().line >= 0 && !n.Mark().is_null();
  if (!in_file && !path.empty()) {
    const auto below = overridden_.lower_bound(path + ".");
    if (below != overridden_.end() && below->first.rfind(path + ".", 0) == 0) {
      SourceLoc l;
      l.override_text = below->second;
      return l;
    }
  }
  SourceLoc l;
  l.file = file_;
  if (in_file) {
    l.line = n.Mark().line + 1;
    l.column = n.Mark().column + 1;
  }
  return l;
}

std::string YamlReader::example(const YAML::Node& n, const std::string& path, const std::string& value) const {
  return loc(n, path).override_text.empty() ? "'" + path + ": " + value + "'" : "'" + path + "=" + value + "'";
}

void YamlReader::fail(const YAML::Node& n, const std::string& path, const std::string& problem,
                      const std::string& fix) const {
  throw InputError(loc(n, path), shown_key(path), problem, fix);
}

std::string YamlReader::shown_key(const std::string& path) const {
  const auto a = aliases_.find(path);
  return a == aliases_.end() ? path : alias_display(a->second.alias, path);
}

void YamlReader::check_map(const YAML::Node& map, const std::string& path, const std::vector<std::string>& allowed) {
  if (!map.IsMap()) fail(map, path, "expected a mapping of keys", "write '" + path + ":' followed by indented keys");
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string key = it->first.as<std::string>();
    const std::string full = join_path(path, key);
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      throw InputError(loc(it->first, echo_ ? full : path), echo_ ? full : path, "unknown key " + shown(key),
                       echo_ ? unknown_key_fix(path, key, allowed) : unknown_key_fix(path, "", allowed));
    record(it->first, full);
  }
}

void YamlReader::record(const YAML::Node& key, const std::string& path) {
  // A key moved from its Bridge spelling has a fresh key node: point at the key as written.
  const auto a = aliases_.find(path);
  const bool moved = a != aliases_.end() && a->second.key_node.IsDefined();
  locations_[path] = loc(moved ? a->second.key_node : key, path);
}

int64_t YamlReader::get_int(const YAML::Node& n, const std::string& path) const {
  if (!n.IsScalar()) fail(n, path, "expected an integer", "write a whole number, e.g. " + example(n, path, "8"));
  const std::string text = n.Scalar();
  try {
    size_t pos = 0;
    long long v = std::stoll(text, &pos, 10);
    if (pos != text.size()) throw std::invalid_argument(text);
    return v;
  } catch (const std::out_of_range&) {
    fail(n, path, "the integer " + shown(text) + " is outside the 64-bit range (|value| < 9.2e18)",
         "write a realistic size, e.g. " + example(n, path, "8"));
  } catch (const std::exception&) {
    fail(n, path, "expected an integer, got " + shown(text),
         "write a whole number, e.g. " + example(n, path, integer_meant(text).value_or("8")));
  }
}

std::optional<std::string> YamlReader::integer_meant(const std::string& text) {
  // "8k" / "128K" / "1M" (sizes as people say them; K = 2^10, as sequence lengths are counted) and "2048.0".
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 12) return std::nullopt;
  const long long whole = std::stoll(text.substr(0, digits));
  const std::string rest = text.substr(digits);
  if (rest == "k" || rest == "K") return std::to_string(whole * 1024);
  if (rest == "m" || rest == "M") return std::to_string(whole * 1024 * 1024);
  if (!rest.empty() && rest.find_first_not_of('0', 1) == std::string::npos && rest[0] == '.')
    return text.substr(0, digits);
  return std::nullopt;
}

double YamlReader::get_double(const YAML::Node& n, const std::string& path) const {
  if (!n.IsScalar()) fail(n, path, "expected a number", "write a number, e.g. " + example(n, path, "1.5"));
  const std::string text = n.Scalar();
  try {
    size_t pos = 0;
    double v = std::stod(text, &pos);
    if (pos != text.size() || !std::isfinite(v)) throw std::invalid_argument(text);
    return v;
  } catch (const std::exception&) {
    fail(n, path, "expected a number, got " + shown(text), "write a number, e.g. " + example(n, path, "1.5"));
  }
}

bool YamlReader::get_bool(const YAML::Node& n, const std::string& path) const {
  if (n.IsScalar()) {
    const std::string& t = n.Scalar();
    if (t == "true" || t == "True") return true;
    if (t == "false" || t == "False") return false;
  }
  fail(n, path, "expected true or false", "write " + example(n, path, "true") + " or " + example(n, path, "false"));
}

std::string YamlReader::get_string(const YAML::Node& n, const std::string& path) const {
  if (!n.IsScalar()) fail(n, path, "expected a string", "write a single value, e.g. " + example(n, path, "text"));
  return n.Scalar();
}

std::vector<int64_t> YamlReader::get_int_list(const YAML::Node& n, const std::string& path) const {
  if (!n.IsSequence()) fail(n, path, "expected a list of integers", "write e.g. " + example(n, path, "[2, 2]"));
  std::vector<int64_t> out;
  for (size_t i = 0; i < n.size(); ++i) {
    try {
      out.push_back(get_int(n[i], path));
    } catch (const InputError& e) {  // the item's problem, with a list in the fix
      fail(n[i], path, "item " + std::to_string(i + 1) + ": " + e.problem(),
           "write whole numbers, e.g. " + example(n, path, "[2, 2]"));
    }
  }
  return out;
}

double YamlReader::positive(const YAML::Node& n, const std::string& path, bool allow_zero) const {
  const double v = get_double(n, path);
  if (v < 0 || (!allow_zero && v == 0)) fail(n, path, "must be positive", "give a value > 0");
  return v;
}

void check_unique_keys(const YAML::Node& root, const std::string& file) {
  std::vector<std::pair<YAML::Node, std::string>> stack{{root, ""}};
  while (!stack.empty()) {
    auto [node, path] = std::move(stack.back());
    stack.pop_back();
    if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) stack.emplace_back(node[i], path + "[" + std::to_string(i) + "]");
      continue;
    }
    if (!node.IsMap()) continue;
    std::map<std::string, std::string> first_at;  // key → "line:column" of its first occurrence
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
      const std::string key_path = path.empty() ? key : path + "." + key;
      const int line = it->first.Mark().line + 1, column = it->first.Mark().column + 1;
      if (it->first.IsScalar()) {
        const auto [seen, inserted] = first_at.emplace(key, fmt::format("{}:{}", line, column));
        if (!inserted) {
          SourceLoc where;
          where.file = file;
          where.line = line;
          where.column = column;
          throw InputError(where, key_path,
                           fmt::format("'{}' is given twice (at {} and {}:{}); YAML would keep only one", key_path,
                                       seen->second, line, column),
                           "keep one of the two");
        }
      }
      stack.emplace_back(it->second, key_path);
    }
  }
}

namespace {

std::string range_text(const plausible::Range& range) {
  std::string unit = range.unit;
  if (!unit.empty()) unit = " " + unit;
  return fmt::format("[{}, {}]{}", range.lo, range.hi, unit);
}

}  // namespace

double YamlReader::plausible(const YAML::Node& n, const std::string& path, const plausible::Range& range) const {
  const double v = get_double(n, path);
  check_plausible(n, path, fmt::format("{}", v), v, range);
  return v;
}

int64_t YamlReader::plausible_int(const YAML::Node& n, const std::string& path, const plausible::Range& range) const {
  const int64_t v = get_int(n, path);
  check_plausible(n, path, std::to_string(v), static_cast<double>(v), range);
  return v;
}

void YamlReader::check_plausible(const YAML::Node& n, const std::string& path, const std::string& text, double v,
                                 const plausible::Range& range) const {
  if (v < range.lo || v > range.hi)
    fail(n, path, fmt::format("{} is outside the plausible range {} ({})", text, range_text(range), range.why),
         "give a value in " + range_text(range));
}

}  // namespace hcpsim
