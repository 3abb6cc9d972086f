#include "shell_arithmetic.hpp"

#include <limits>
#include <utility>

#include "shell_lexer.hpp"

namespace hcpsim::shell {
namespace {

/// A recursive-descent parser: sum := product (('+'|'-') product)*, product := unary (('*'|'/'|'%') unary)*,
/// unary := '-' unary | atom, atom := '(' sum ')' | digits | variable. Its recursion is bounded by `depth_`
/// (kMaxArithmeticDepth), shared with the evaluations of variables it descends into.
class Arithmetic {
 public:
  Arithmetic(std::string text, const std::map<std::string, std::string>& vars, int depth, std::string& error)
      : s_(std::move(text)), vars_(vars), depth_(depth), error_(error) {}

  std::optional<int64_t> eval() {
    auto v = sum();
    blanks();
    if (!v || p_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  /// Records the first error and yields no value (every caller then unwinds).
  std::optional<int64_t> fail(const std::string& what) {
    if (error_.empty()) error_ = what;
    return std::nullopt;
  }
  /// One more level of nesting; false (with the error set) beyond kMaxArithmeticDepth.
  bool deeper() {
    if (++depth_ <= kMaxArithmeticDepth) return true;
    fail("nested more than " + std::to_string(kMaxArithmeticDepth) + " levels deep (parentheses, unary minus or "
         "variables referring to variables, a variable that refers to itself included)");
    return false;
  }
  void blanks() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
  }
  std::optional<int64_t> apply(char op, int64_t a, int64_t b) {
    int64_t r = 0;
    switch (op) {
      case '+':
        if (__builtin_add_overflow(a, b, &r)) return fail("64-bit overflow in " + std::to_string(a) + " + " + std::to_string(b));
        return r;
      case '-':
        if (__builtin_sub_overflow(a, b, &r)) return fail("64-bit overflow in " + std::to_string(a) + " - " + std::to_string(b));
        return r;
      case '*':
        if (__builtin_mul_overflow(a, b, &r)) return fail("64-bit overflow in " + std::to_string(a) + " * " + std::to_string(b));
        return r;
      default: break;
    }
    if (b == 0) return fail(op == '/' ? "division by zero" : "modulo by zero");
    if (a == std::numeric_limits<int64_t>::min() && b == -1)
      return fail(std::string("64-bit overflow in ") + std::to_string(a) + " " + op + " -1");
    return op == '/' ? a / b : a % b;
  }
  std::optional<int64_t> sum() {
    auto a = product();
    while (a) {
      blanks();
      if (p_ >= s_.size() || (s_[p_] != '+' && s_[p_] != '-')) break;
      const char op = s_[p_++];
      auto b = product();
      if (!b) return std::nullopt;
      a = apply(op, *a, *b);
    }
    return a;
  }
  std::optional<int64_t> product() {
    auto a = unary();
    while (a) {
      blanks();
      if (p_ >= s_.size() || (s_[p_] != '*' && s_[p_] != '/' && s_[p_] != '%')) break;
      const char op = s_[p_++];
      auto b = unary();
      if (!b) return std::nullopt;
      a = apply(op, *a, *b);
    }
    return a;
  }
  std::optional<int64_t> unary() {
    blanks();
    if (p_ < s_.size() && s_[p_] == '-') {
      ++p_;
      if (!deeper()) return std::nullopt;
      auto v = unary();
      --depth_;
      if (!v) return std::nullopt;
      if (*v == std::numeric_limits<int64_t>::min()) return fail("64-bit overflow in -(" + std::to_string(*v) + ")");
      return -*v;
    }
    return atom();
  }
  std::optional<int64_t> number() {
    int64_t v = 0;
    const size_t start = p_;
    while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) {
      if (__builtin_mul_overflow(v, int64_t{10}, &v) || __builtin_add_overflow(v, int64_t{s_[p_] - '0'}, &v)) {
        while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
        return fail("the literal " + s_.substr(start, p_ - start) + " does not fit in 64 bits");
      }
      ++p_;
    }
    return v;
  }
  std::optional<int64_t> atom() {
    blanks();
    if (p_ >= s_.size()) return std::nullopt;
    if (s_[p_] == '(') {
      ++p_;
      if (!deeper()) return std::nullopt;
      auto v = sum();
      --depth_;
      blanks();
      if (!v || p_ >= s_.size() || s_[p_] != ')') return std::nullopt;
      ++p_;
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(s_[p_]))) return number();
    if (s_[p_] == '$') ++p_;
    bool braces = p_ < s_.size() && s_[p_] == '{';
    if (braces) ++p_;
    const size_t start = p_;
    while (p_ < s_.size() && is_name_char(s_[p_])) ++p_;
    if (p_ == start) return std::nullopt;
    const std::string name = s_.substr(start, p_ - start);
    if (braces) {
      if (p_ >= s_.size() || s_[p_] != '}') return std::nullopt;
      ++p_;
    }
    auto it = vars_.find(name);
    if (it == vars_.end()) return std::nullopt;
    if (depth_ + 1 > kMaxArithmeticDepth) {
      (void)deeper();
      return std::nullopt;
    }
    Arithmetic inner(it->second, vars_, depth_ + 1, error_);
    return inner.eval();
  }

  std::string s_;
  const std::map<std::string, std::string>& vars_;
  int depth_ = 0;
  std::string& error_;
  size_t p_ = 0;
};

}  // namespace

ArithmeticResult eval_shell_arithmetic(const std::string& text, const std::map<std::string, std::string>& vars) {
  ArithmeticResult r;
  Arithmetic a(text, vars, 0, r.error);
  r.value = a.eval();
  if (!r.error.empty()) r.value.reset();
  return r;
}

}  // namespace hcpsim::shell
