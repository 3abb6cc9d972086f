#include "scenario_overrides.hpp"

#include <map>
#include <utility>
#include <sstream>

#include "hcpsim/config/key_aliases.hpp"
#include "hcpsim/core/error.hpp"

namespace hcpsim {
namespace {

/// One override, parsed: its dotted key (canonical), the key as written, the key's components and the value.
struct Override {
  std::string key;
  std::string written;
  std::vector<std::string> parts;
  YAML::Node value;
};

/// Splits "a.b.c=value" (error locations name `where`, the override text); a Megatron-Bridge key path becomes
/// the scenario key it means (key_aliases.hpp).
Override parse_override(const std::string& text, const SourceLoc& where) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(where, "", "an override must look like key.path=value",
                     "write e.g. model.seq_length=131072 or \"parallel.hierarchical_context_parallel_sizes=[8,2]\"");
  Override o;
  o.key = text.substr(0, eq);
  o.written = o.key;
  if (std::string canonical = canonical_key_of(o.key); !canonical.empty()) o.key = std::move(canonical);
  const std::string value_text = text.substr(eq + 1);
  if (o.key.front() == '.' || o.key.back() == '.' || o.key.find("..") != std::string::npos)
    throw InputError(where, o.key, "empty component in key path", "write dotted keys such as parallel.context_parallel_size");
  std::stringstream ss(o.key);
  std::string part;
  while (std::getline(ss, part, '.')) {
    if (part.empty())
      throw InputError(where, o.key, "empty component in key path", "write dotted keys such as parallel.context_parallel_size");
    o.parts.push_back(part);
  }
  try {
    o.value = YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    throw InputError(where, o.key, "value is not valid YAML (" + e.msg + ")", "quote the whole override, e.g. \"key=[2,2]\"");
  }
  if (!o.value.IsDefined() || (o.value.IsNull() && value_text.empty()))
    throw InputError(where, o.key, "empty value", "give a value after '=' (use null to unset a key)");
  return o;
}

/// Sets `o.value` at `o.parts` below `root`, creating missing or null sections on the way.
void set_at_path(YAML::Node& root, const Override& o, const SourceLoc& where) {
  // Walk with fresh handles: yaml-cpp Node assignment rebinds, so index from the root each time.
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < o.parts.size(); ++i) {
    YAML::Node child = chain.back()[o.parts[i]];
    if (!child.IsDefined() || child.IsNull()) {
      chain.back()[o.parts[i]] = YAML::Node(YAML::NodeType::Map);
      child = chain.back()[o.parts[i]];
    }
    if (!child.IsMap()) {
      std::string prefix;
      for (size_t j = 0; j <= i; ++j) prefix += (j ? "." : "") + o.parts[j];
      throw InputError(where, o.key, "'" + prefix + "' is not a section", "override a key inside a section");
    }
    chain.push_back(child);
  }
  chain.back()[o.parts.back()] = o.value;
}

/// The value of `key` in mapping `map` and its key node (undefined nodes when absent or `map` is no mapping).
std::pair<YAML::Node, YAML::Node> entry(const YAML::Node& map, const std::string& key) {
  if (map.IsMap())
    for (auto it = map.begin(); it != map.end(); ++it)
      if (it->first.IsScalar() && it->first.Scalar() == key) return {it->second, it->first};
  return {YAML::Node(YAML::NodeType::Undefined), YAML::Node(YAML::NodeType::Undefined)};
}

/// "section" and "key" of a two-component path (every alias and canonical key in the table has two).
std::pair<std::string, std::string> split2(const std::string& path) {
  const auto dot = path.find('.');
  return {path.substr(0, dot), path.substr(dot + 1)};
}

}  // namespace

std::map<std::string, std::string> apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides,
                                                   std::map<std::string, AliasUse>& aliases) {
  std::map<std::string, std::string> overridden;
  std::map<std::string, std::string> spelled;  // canonical key → the spelling its first override used
  for (const auto& text : overrides) {
    SourceLoc where;
    where.override_text = text;
    const Override o = parse_override(text, where);
    const auto [first, is_new] = spelled.emplace(o.key, o.written);
    if (!is_new && first->second != o.written)
      throw InputError(where, o.written == o.key ? o.key : alias_display(o.written, o.key),
                       "set twice, as " + first->second + " and as " + o.written + " (the same setting)",
                       "keep one of the two overrides");
    set_at_path(root, o, where);
    overridden[o.key] = text;
    if (o.written != o.key) {
      aliases[o.key] = AliasUse{o.written, YAML::Node(YAML::NodeType::Undefined)};
    } else {
      aliases.erase(o.key);  // the canonical spelling now sets it
    }
  }
  return overridden;
}

std::map<std::string, AliasUse> rewrite_alias_keys(YAML::Node& root, const std::string& file) {
  std::map<std::string, AliasUse> moved;
  if (!root.IsMap()) return moved;
  for (const auto& a : bridge_key_aliases()) {
    const auto [alias_section, alias_key] = split2(a.alias);
    YAML::Node from = root[alias_section];
    const auto [value, key_node] = entry(from, alias_key);
    if (!value.IsDefined()) continue;
    const auto [section, key] = split2(a.canonical);
    YAML::Node to = entry(root, section).first;
    const auto [canonical_value, canonical_key_node] = entry(to, key);
    const auto prior = moved.find(a.canonical);
    if (canonical_value.IsDefined() || prior != moved.end()) {
      SourceLoc l;
      l.file = file;
      l.line = key_node.Mark().line + 1;
      l.column = key_node.Mark().column + 1;
      const std::string other = prior != moved.end() ? prior->second.alias : a.canonical;
      throw InputError(l, alias_display(a.alias, a.canonical),
                       "given twice, as " + other + " and as " + a.alias + " (the same setting)", "keep one of them");
    }
    if (!to.IsDefined() || to.IsNull()) {
      root[section] = YAML::Node(YAML::NodeType::Map);
      to = root[section];
    }
    if (!to.IsMap()) continue;  // the section reader reports the malformed section; the alias stays unknown there
    to[key] = value;
    from.remove(alias_key);
    moved[a.canonical] = AliasUse{a.alias, key_node};
    // A Bridge-only group (train:, ddp:, optimizer:) emptied by the move is gone; hcpsim's sections stay.
    if (from.size() == 0 && alias_section != "model" && alias_section != "parallel") root.remove(alias_section);
  }
  return moved;
}

}  // namespace hcpsim
