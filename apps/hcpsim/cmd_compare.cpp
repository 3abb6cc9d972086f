#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "app_common.hpp"
#include "hcpsim/oracles/dump.hpp"

namespace hcpsim::app {
namespace {

/// Options of `hcpsim compare`.
struct CompareArgs {
  std::string a_path, b_path;
  double rtol = 0;  ///< used when rtol_given; else default_compare_tolerance of the coarser dtype
  double atol = 0;  ///< used when atol_given; else rtol
  bool rtol_given = false;
  bool atol_given = false;
};

int cmd_compare(const CompareArgs& args) {
  const DumpContents a = read_dump(args.a_path);
  const DumpContents b = read_dump(args.b_path);
  // the coarser of the two dtypes decides the default tolerance
  auto coarseness = [](Dtype d) { return d == Dtype::fp64 ? 0 : d == Dtype::fp32 ? 1 : d == Dtype::fp16 ? 2 : 3; };
  const Dtype coarse = coarseness(a.dtype) >= coarseness(b.dtype) ? a.dtype : b.dtype;
  for (const auto& [value, given, option] :
       {std::tuple{args.rtol, args.rtol_given, "--rtol"}, std::tuple{args.atol, args.atol_given, "--atol"}}) {
    if (given && !(value >= 0 && std::isfinite(value)))
      throw InputError(SourceLoc{}, option, fmt::format("{} is not a tolerance", value),
                       "pass a finite value >= 0, or leave it out for the dtype's default");
  }
  const double rtol = args.rtol_given ? args.rtol : default_compare_tolerance(coarse);
  // --atol defaults to --rtol when only --rtol is given, else to the dtype's default.
  const double atol = args.atol_given ? args.atol : rtol;
  const DumpComparison r = compare_dumps(a, b, rtol, atol, args.a_path, args.b_path);
  fmt::print("compare {} (B) against {} (A): /hcp elementwise |B - A| <= atol + rtol*|A|, atol {:.2e}, rtol {:.2e}\n",
             args.b_path, args.a_path, atol, rtol);
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
  fmt::print("  result: FAIL: worst tensor {} ({} elements outside tolerance), element [b={}, s={}, h={}, w={}]\n",
             w.tensor, r.violations[worst], w.worst_index.size() == 4 ? w.worst_index[0] : -1,
             w.worst_index.size() == 4 ? w.worst_index[1] : -1, w.worst_index.size() == 4 ? w.worst_index[2] : -1,
             w.worst_index.size() == 4 ? w.worst_index[3] : -1);
  return kExitFailed;
}

}  // namespace

CLI::App* add_compare_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("compare", "compare two HDF5 dumps (hcpsim verify --dump, or your own tensors)");
  auto args = std::make_shared<CompareArgs>();
  cmd->add_option("a", args->a_path, "first dump (its /hcp is the baseline, its /reference the fp64 truth)")
      ->required();
  cmd->add_option("b", args->b_path, "second dump")->required();
  cmd->add_option("--rtol", args->rtol, "relative tolerance (default by dtype: fp64 1e-10, fp32 1e-5, bf16 2.5e-2, "
                                        "fp16 5e-3)");
  cmd->add_option("--atol", args->atol, "absolute tolerance (default: as rtol)");
  cmd->callback([&exit_code, args, cmd] {
    args->rtol_given = cmd->get_option("--rtol")->count() > 0;
    args->atol_given = cmd->get_option("--atol")->count() > 0;
    exit_code = cmd_compare(*args);
  });
  return cmd;
}

}  // namespace hcpsim::app
