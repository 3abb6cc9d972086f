#include "scenario_overrides.hpp"

#include <map>
#include <sstream>

#include "hcpsim/core/error.hpp"

namespace hcpsim {
namespace {

/// One override, parsed: its dotted key, the key's components and the value.
struct Override {
  std::string key;
  std::vector<std::string> parts;
  YAML::Node value;
};

/// Splits "a.b.c=value" (error locations name `where`, the override text).
/// Megatron-Bridge key paths accepted as overrides for the scenario key they mean (a recipe's knob pasted as it is).
/// Source: Megatron-Bridge ConfigContainer (`ddp:` holds DistributedDataParallelConfig).
const std::map<std::string, std::string> kBridgeOverrideAliases = {
    {"ddp.grad_reduce_in_fp32", "parallel.grad_reduce_in_fp32"},
};

Override parse_override(const std::string& text, const SourceLoc& where) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(where, "", "an override must look like key.path=value",
                     "write e.g. model.seq_length=131072 or \"parallel.hierarchical_context_parallel_sizes=[8,2]\"");
  Override o;
  o.key = text.substr(0, eq);
  if (const auto alias = kBridgeOverrideAliases.find(o.key); alias != kBridgeOverrideAliases.end()) o.key = alias->second;
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

}  // namespace

std::string apply_override(YAML::Node& root, const std::string& text) {
  SourceLoc where;
  where.override_text = text;
  const Override o = parse_override(text, where);
  set_at_path(root, o, where);
  return o.key;
}

std::map<std::string, std::string> apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> overridden;
  for (const auto& text : overrides) overridden[apply_override(root, text)] = text;
  return overridden;
}

}  // namespace hcpsim
