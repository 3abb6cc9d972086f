#pragma once
// `$(( ... ))` arithmetic of launch scripts, evaluated over the variables the script has set so far.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace hcpsim::shell {

/// Integer arithmetic of `$(( ... ))`: + - * / % (C precedence, truncating division), unary minus and
/// parentheses over decimal integers and variables (`N`, `$N`, `${N}`; a variable's value is itself evaluated).
/// @param text  the expression between `$((` and `))`
/// @param vars  shell variables by name
/// @returns std::nullopt when the text is not such an expression, a variable is not set, or it divides by 0.
std::optional<int64_t> eval_shell_arithmetic(const std::string& text, const std::map<std::string, std::string>& vars);

}  // namespace hcpsim::shell
