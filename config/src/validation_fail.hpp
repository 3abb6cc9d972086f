#pragma once
/// How the validation rules report a broken rule between several keys. Private to config.

#include <string>
#include <vector>

#include "hcpsim/config/scenario.hpp"
#include "hcpsim/core/error.hpp"

namespace hcpsim {

/// Throws the InputError of a rule between several keys, named by `key`: located at the first of `keys` set by a
/// command-line override (the change the user just made), else at `key`'s location in the file.
/// @throws InputError always.
[[noreturn]] inline void fail_between(const Scenario& s, const std::string& key, const std::vector<std::string>& keys,
                                      const std::string& problem, const std::string& fix) {
  for (const auto& k : keys) {
    const SourceLoc l = s.loc(k);
    if (!l.override_text.empty()) throw InputError(l, key, problem, fix);
  }
  throw InputError(s.loc(key), key, problem, fix);
}

}  // namespace hcpsim
