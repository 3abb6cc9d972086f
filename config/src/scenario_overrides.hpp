#pragma once
/// Megatron-Bridge style `key.path=value` overrides of a scenario tree, applied before the sections are read (and
/// so before validation). Private to config: yaml-cpp stays out of the public headers.

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

namespace hcpsim {

/// Applies one "a.b.c=value" override to `root` (the value parsed as YAML; missing or null sections on the path
/// are created); returns the dotted key.
/// @throws InputError naming the override text: no '=', an empty key component, a value that is not YAML or is
/// empty, or a path through a key that is not a section.
std::string apply_override(YAML::Node& root, const std::string& text);

/// Applies `overrides` in order; returns each overridden dotted key → the text of its last override.
/// @throws InputError as apply_override.
std::map<std::string, std::string> apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides);

}  // namespace hcpsim
