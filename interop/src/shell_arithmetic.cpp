#include "shell_arithmetic.hpp"

#include <utility>

#include "shell_lexer.hpp"

namespace hcpsim::shell {
namespace {

/// A recursive-descent parser: sum := product (('+'|'-') product)*, product := unary (('*'|'/'|'%') unary)*,
/// unary := '-' unary | atom, atom := '(' sum ')' | digits | variable.
class Arithmetic {
 public:
  Arithmetic(std::string text, const std::map<std::string, std::string>& vars) : s_(std::move(text)), vars_(vars) {}

  std::optional<int64_t> eval() {
    auto v = sum();
    blanks();
    if (!v || p_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void blanks() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
  }
  std::optional<int64_t> sum() {
    auto a = product();
    while (a) {
      blanks();
      if (p_ >= s_.size() || (s_[p_] != '+' && s_[p_] != '-')) break;
      const char op = s_[p_++];
      auto b = product();
      if (!b) return std::nullopt;
      a = op == '+' ? *a + *b : *a - *b;
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
      if (op != '*' && *b == 0) return std::nullopt;
      a = op == '*' ? *a * *b : op == '/' ? *a / *b : *a % *b;
    }
    return a;
  }
  std::optional<int64_t> unary() {
    blanks();
    if (p_ < s_.size() && s_[p_] == '-') {
      ++p_;
      auto v = unary();
      if (v) return -*v;
      return std::nullopt;
    }
    return atom();
  }
  std::optional<int64_t> atom() {
    blanks();
    if (p_ >= s_.size()) return std::nullopt;
    if (s_[p_] == '(') {
      ++p_;
      auto v = sum();
      blanks();
      if (!v || p_ >= s_.size() || s_[p_] != ')') return std::nullopt;
      ++p_;
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(s_[p_]))) {
      int64_t v = 0;
      while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) v = v * 10 + (s_[p_++] - '0');
      return v;
    }
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
    Arithmetic inner(it->second, vars_);
    return inner.eval();
  }

  std::string s_;
  const std::map<std::string, std::string>& vars_;
  size_t p_ = 0;
};

}  // namespace

std::optional<int64_t> eval_shell_arithmetic(const std::string& text, const std::map<std::string, std::string>& vars) {
  Arithmetic a(text, vars);
  return a.eval();
}

}  // namespace hcpsim::shell
