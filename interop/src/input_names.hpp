#pragma once
// Names derived from an input's path, shared by the importers and the scenario writer.

#include <string>

namespace hcpsim::interop {

/// The input's name in messages: "-" (stdin) → "<stdin>", anything else unchanged.
inline std::string display(const std::string& name) { return name == "-" ? "<stdin>" : name; }

/// The scenario name of an input: the file's stem with characters other than [A-Za-z0-9_.-] replaced by '_';
/// `fallback` for stdin ("-") or an empty stem.
std::string scenario_name_of(const std::string& path, const std::string& fallback);

}  // namespace hcpsim::interop
