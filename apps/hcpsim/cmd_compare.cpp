#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "app_common.hpp"
#include "hcpsim/oracles/dump.hpp"
#include "hcpsim/oracles/isolated_read.hpp"

namespace hcpsim::app {
namespace {

/// Options of `hcpsim compare`.
struct CompareArgs {
  std::string a_path, b_path;
  double rtol = 0;  ///< used when rtol_given; else default_compare_tolerance of A's dtype
  double atol = 0;  ///< used when atol_given; else rtol
  bool rtol_given = false;
  bool atol_given = false;
  std::vector<std::string> tensors;  ///< --tensors; empty: all five
};

/// The --tensors names as dump_tensor_names spells them ("lse" is accepted for softmax_lse).
std::vector<std::string> selected_tensors(const std::vector<std::string>& given) {
  std::vector<std::string> out;
  const auto& names = dump_tensor_names();
  for (std::string t : given) {
    if (t == "lse") t = "softmax_lse";
    if (std::find(names.begin(), names.end(), t) == names.end())
      throw InputError(SourceLoc{}, "--tensors", fmt::format("unknown tensor '{}'", t),
                       "name tensors of /hcp, comma separated: out, softmax_lse, dq, dk, dv (e.g. --tensors "
                       "out,dq,dk,dv when your framework returns no softmax_lse)");
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

/// One /meta provenance value as text, "(absent)" when the file has none, "-" when it is empty.
std::string meta_value(const DumpContents& d, const std::string& key) {
  if (const auto it = d.meta_text.find(key); it != d.meta_text.end()) return it->second.empty() ? "-" : it->second;
  if (const auto it = d.meta_number.find(key); it != d.meta_number.end()) return fmt::format("{}", it->second);
  return "(absent)";
}

/// Prints both files' provenance, one row per key, when any key differs (the scenario YAML by its digest).
void print_provenance_difference(const DumpContents& a, const DumpContents& b) {
  static const char* const keys[] = {"hcpsim_version", "compiler", "x86_level",   "cuda",  "backend",
                                     "dtype",          "seed",     "cp_comm_type", "inject", "overrides",
                                     "scenario_digest"};
  bool differs = false;
  for (const char* k : keys) differs = differs || meta_value(a, k) != meta_value(b, k);
  if (!differs) return;
  fmt::print("  provenance differs (/meta; * marks a difference):\n");
  fmt::print("    {:<17} {:<34} {}\n", "", "A", "B");
  for (const char* k : keys) {
    const std::string va = meta_value(a, k), vb = meta_value(b, k);
    fmt::print("  {} {:<17} {:<34} {}\n", va == vb ? ' ' : '*', k, va, vb);
  }
}

/// The worst element of a failing tensor: where it is, B's and A's values (compare_tensor's got = B, ref = A),
/// the |B - A| allowed there, A's fp64 /reference value, and which file is not finite there. "" without an index.
std::string worst_element_text(const TensorError& w, const DumpContents& a, double atol, double rtol) {
  if (w.worst_index.size() != 4) return "";
  const auto& i = w.worst_index;
  const HostTensor* ref = w.tensor == "out"           ? &a.reference.out
                          : w.tensor == "softmax_lse" ? &a.reference.softmax_lse
                          : w.tensor == "dq"          ? &a.reference.dq
                          : w.tensor == "dk"          ? &a.reference.dk
                                                      : &a.reference.dv;
  const bool has_ref = ref->shape().size() == 4 && i[0] < ref->shape()[0] && i[1] < ref->shape()[1] &&
                       i[2] < ref->shape()[2] && i[3] < ref->shape()[3];
  auto num = [](double v) { return std::isnan(v) ? std::string("nan") : fmt::format("{:.6g}", v); };
  std::string text = fmt::format(", element [b={}, s={}, h={}, w={}]: B {}, A {}", i[0], i[1], i[2], i[3],
                                 num(w.worst_value), num(w.worst_reference));
  const bool b_finite = std::isfinite(w.worst_value), a_finite = std::isfinite(w.worst_reference);
  if (b_finite && a_finite) text += fmt::format(" (allowed |B - A| <= {:.3g})", atol + rtol * std::abs(w.worst_reference));
  if (!has_ref) {
    if (!a_finite && b_finite) text += "; A, the baseline, is the one not finite there";
    return text;
  }
  const double truth = (*ref)(i[0], i[1], i[2], i[3]);
  text += ", A's /reference " + num(truth);
  // A non-finite value is an error unless the reference holds it too (-inf: the softmax_lse of an empty row).
  const bool a_wrong = !a_finite && w.worst_reference != truth, b_wrong = !b_finite && w.worst_value != truth;
  if (a_wrong && !b_wrong) text += "; the error is A's: the baseline is not finite where the reference is";
  if (b_wrong && !a_wrong) text += "; B is not finite where the reference is";
  if (a_wrong && b_wrong) text += "; both are non-finite where the reference is not";
  return text;
}

int cmd_compare(const CompareArgs& args) {
  const std::vector<std::string> tensors = selected_tensors(args.tensors);
  const DumpContents a = read_dump_isolated(args.a_path, tensors);
  const DumpContents b = read_dump_isolated(args.b_path, tensors, false);  // judged against A's reference
  for (const auto& [value, given, option] :
       {std::tuple{args.rtol, args.rtol_given, "--rtol"}, std::tuple{args.atol, args.atol_given, "--atol"}}) {
    if (given && !(value >= 0 && std::isfinite(value)))
      throw InputError(SourceLoc{}, option, fmt::format("{} is not a tolerance", value),
                       "pass a finite value >= 0, or leave it out for the default of A's dtype");
  }
  // The reference (A) decides the default tolerance: the file under test must not choose how strictly it is judged.
  const double rtol = args.rtol_given ? args.rtol : default_compare_tolerance(a.dtype);
  // --atol defaults to --rtol when only --rtol is given, else to the dtype's default.
  const double atol = args.atol_given ? args.atol : rtol;
  const DumpComparison r = compare_dumps(a, b, rtol, atol, args.a_path, args.b_path, tensors);
  const std::string dtype_default = a.meta_text.count("dtype") ? "the default of A's dtype " + to_string(a.dtype)
                                                                : "the default of fp64: A's /meta names no dtype";
  // Where each came from: an option, the other option (atol follows --rtol), or A's dtype.
  const std::string from = args.atol_given && args.rtol_given ? "--atol, --rtol"
                           : args.rtol_given                  ? "--rtol, and atol as it"
                           : args.atol_given                  ? "--atol; rtol " + dtype_default
                                                              : dtype_default;
  fmt::print("compare {} (B) against {} (A): /hcp elementwise |B - A| <= atol + rtol*|A|, atol {:.2e}, rtol {:.2e} "
             "({})\n",
             args.b_path, args.a_path, atol, rtol, from);
  print_provenance_difference(a, b);
  fmt::print("  {:<12} {:<22} {:>11} {:>11} {:>11} {:>11} {:>11}  {}\n", "tensor", "shape", "max_abs_err",
             "max_rel_err", "rel_l2_err", "B_vs_ref", "violations", "result");
  for (size_t i = 0; i < r.tensors.size(); ++i) {
    const TensorError& e = r.tensors[i];
    fmt::print("  {:<12} {:<22} {:>11.3e} {:>11.3e} {:>11.3e} {:>11.3e} {:>11}  {}\n", e.tensor, join(e.shape),
               e.max_abs_err, e.max_rel_err, e.rel_l2_err, r.b_vs_reference[i], r.violations[i],
               e.pass ? "pass" : "FAIL");
  }
  if (r.pass) {
    fmt::print("  result: PASS\n");
    return kExitOk;
  }
  size_t worst = 0;
  for (size_t i = 0; i < r.tensors.size(); ++i)
    if (r.violations[i] > r.violations[worst]) worst = i;
  const TensorError& w = r.tensors[worst];
  fmt::print("  result: FAIL: worst tensor {} ({} elements outside tolerance){}\n", w.tensor, r.violations[worst],
             worst_element_text(w, a, atol, rtol));
  return kExitFailed;
}

}  // namespace

CLI::App* add_compare_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("compare", "compare two HDF5 dumps (hcpsim verify --dump, or your own tensors)");
  auto args = std::make_shared<CompareArgs>();
  cmd->add_option("a", args->a_path,
                  "reference dump (its /hcp is the baseline, its /reference the fp64 truth, its dtype the default "
                  "tolerance)")
      ->required();
  cmd->add_option("b", args->b_path, "dump under test")->required();
  cmd->add_option("--rtol", args->rtol, "relative tolerance (default by A's dtype: fp64 1e-10, fp32 1e-5, bf16 "
                                        "2.5e-2, fp16 5e-3)");
  cmd->add_option("--atol", args->atol, "absolute tolerance (default: as rtol)");
  cmd->add_option("--tensors", args->tensors,
                  "compare only these tensors of /hcp (comma separated: out, softmax_lse, dq, dk, dv; default all); "
                  "the others may be absent from both files")
      ->delimiter(',');
  cmd->callback([&exit_code, args, cmd] {
    args->rtol_given = cmd->get_option("--rtol")->count() > 0;
    args->atol_given = cmd->get_option("--atol")->count() > 0;
    exit_code = cmd_compare(*args);
  });
  return cmd;
}

}  // namespace hcpsim::app
