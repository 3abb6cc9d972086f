#pragma once
/// Megatron-Bridge style `key.path=value` overrides of a scenario tree, applied before the sections are read (and
/// so before validation). Private to config: yaml-cpp stays out of the public headers.

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

namespace hcpsim {

/// A scenario key the user spelled the Megatron-Bridge way (key_aliases.hpp): the spelling, and for a key in the
/// file its key node (where messages point); undefined for an override.
struct AliasUse {
  std::string alias;
  YAML::Node key_node;
};

/// Applies `overrides` in order ("a.b.c=value", the value parsed as YAML; missing or null sections on the path are
/// created; a Megatron-Bridge key path sets the scenario key it means); returns each overridden dotted key → the
/// text of its last override. Records in `aliases` each key an override spelled the Bridge way (and forgets one
/// a later canonical override sets).
/// @throws InputError naming the override text: no '=', an empty key component, a value that is not YAML or is
/// empty, a path through a key that is not a section, or one key set both by its Bridge spelling and another.
std::map<std::string, std::string> apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides,
                                                   std::map<std::string, AliasUse>& aliases);

/// Moves every Megatron-Bridge spelled key of the file tree `root` (model.context_parallel_size, train.*, ddp.*,
/// optimizer.*) to its canonical place, dropping a Bridge-only group it empties; returns canonical key → use.
/// @throws InputError at the alias (in `file`) when its canonical key, or another alias of it, is also given.
std::map<std::string, AliasUse> rewrite_alias_keys(YAML::Node& root, const std::string& file);

}  // namespace hcpsim
