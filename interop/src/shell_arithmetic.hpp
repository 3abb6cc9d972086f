#pragma once
// `$(( ... ))` arithmetic of launch scripts, evaluated over the variables the script has set so far.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace hcpsim::shell {

/// The outcome of one `$(( ... ))`: a value; or no value and no error (the text is not such an expression, or a
/// variable in it is not set: the caller leaves the text unresolved); or an error (the expression is one, but bash
/// would fail or overflow on it: the caller reports it naming the line).
struct ArithmeticResult {
  std::optional<int64_t> value;
  std::string error;  ///< e.g. "division by zero"; empty unless the evaluation must fail
};

/// Most nested parentheses, unary minuses and variable indirections one expression may hold; deeper input is an
/// error, so the recursive-descent parser's depth is bounded by this, never by the input.
inline constexpr int kMaxArithmeticDepth = 256;

/// Integer arithmetic of `$(( ... ))`: + - * / % (C precedence, truncating division), unary minus and
/// parentheses over decimal integers and variables (`N`, `$N`, `${N}`; a variable's value is itself evaluated).
/// Checked 64-bit arithmetic: an overflowing literal, sum, difference, product or negation, INT64_MIN / −1 and
/// INT64_MIN % −1, division and modulo by zero, and nesting beyond kMaxArithmeticDepth (a variable that refers to
/// itself included) are errors, where bash would wrap around or fail.
/// @param text  the expression between `$((` and `))`
/// @param vars  shell variables by name
ArithmeticResult eval_shell_arithmetic(const std::string& text, const std::map<std::string, std::string>& vars);

}  // namespace hcpsim::shell
