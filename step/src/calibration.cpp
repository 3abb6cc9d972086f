#include "hcpsim/step/calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "hcpsim/config/calibration_file.hpp"
#include "hcpsim/config/plausible_ranges.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/types.hpp"
#include "hcpsim/sim/cost_model.hpp"

namespace hcpsim::sim {
namespace {

[[noreturn]] void fail(const std::string& path, int64_t line, const std::string& key, const std::string& problem,
                       const std::string& fix) {
  SourceLoc l;
  l.file = path;
  l.line = static_cast<int>(line);
  throw InputError(l, key, problem, fix);
}

constexpr const char* kUnitsFix =
    "measured_s is in seconds (convert a profiler's us or ms column); check that --gpu names the GPU measured";

/// A row's achieved rate against the peak it is held to, flops / (busy_s · peak). @throws InputError at the row
/// when it is above 1: no GPU runs it (a unit or --gpu mix-up).
double checked_rate(const MeasuredOpRow& r, double flops, double busy_s, double peak, const std::string& gpu,
                    const std::string& csv_path) {
  const double rate = flops / (busy_s * peak);
  if (rate > 1)
    fail(csv_path, r.line, "measured_s",
         fmt::format("{} row: {:.4g} FLOPs in {:.4g} s is {:.1f} TFLOP/s, above the {} peak it is held to ({:.1f} "
                     "TFLOP/s for {})",
                     r.op_kind, flops, r.measured_s, flops / busy_s / 1e12, gpu, peak / 1e12, r.dtype),
         kUnitsFix);
  return rate;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bool is_elementwise_kind(const std::string& k) {
  return k == "elementwise" || k == "copy" || k == "lse_merge" || k == "out_correction";
}

}  // namespace

namespace {

// Measured attention efficiencies of one direction, keyed by (causal, head_dim, q_rows, kv_rows).
using AttentionPoints = std::map<std::tuple<bool, int64_t, int64_t, int64_t>, std::vector<double>>;

// Step 1. Memory-bound kernels: t = a + bytes · s, least squares (s = 1 / bandwidth).
void fit_memory_bound(const std::vector<MeasuredOpRow>& rows, const std::string& csv_path, CalibrationFit& fit) {
  GpuSpec& g = fit.gpu;
  std::vector<std::pair<double, double>> pts;
  std::set<int64_t> sizes;
  for (const auto& r : rows)
    if (is_elementwise_kind(r.op_kind)) {
      pts.emplace_back(static_cast<double>(r.bytes), r.measured_s);
      sizes.insert(r.bytes);
    }
  if (sizes.size() < 2) {
    fit.notes.push_back("fewer than 2 distinct elementwise sizes; kept the base kernel_launch_overhead and hbm_bandwidth");
    return;
  }
  double mx = 0, my = 0;
  for (const auto& [x, y] : pts) {
    mx += x;
    my += y;
  }
  mx /= static_cast<double>(pts.size());
  my /= static_cast<double>(pts.size());
  double sxy = 0, sxx = 0;
  for (const auto& [x, y] : pts) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) * (x - mx);
  }
  const double slope = sxy / sxx, intercept = my - slope * mx;
  const double bandwidth_gb_s = slope > 0 ? 1e-9 / slope : 0, overhead_us = intercept * 1e6;
  const bool bandwidth_off = bandwidth_gb_s < plausible::kHbmBandwidth.lo || bandwidth_gb_s > plausible::kHbmBandwidth.hi;
  const bool overhead_off = overhead_us > plausible::kLaunchOverhead.hi;
  if (slope > 0 && intercept >= 0 && (bandwidth_off || overhead_off)) {
    // Name the figure that is out of range (both when both are), each with its range.
    std::string what;
    if (bandwidth_off)
      what = fmt::format("an HBM bandwidth of {:.4g} GB/s, outside what a GPU does ({} to {} GB/s)", bandwidth_gb_s,
                         plausible::kHbmBandwidth.lo, plausible::kHbmBandwidth.hi);
    if (overhead_off)
      what += fmt::format("{}a launch overhead of {:.4g} us, above what a GPU takes (at most {} us)",
                          what.empty() ? "" : " and ", overhead_us, plausible::kLaunchOverhead.hi);
    fail(csv_path, 0, "measured_s", "the elementwise rows give " + what, kUnitsFix);
  }
  if (slope > 0 && intercept >= 0) {
    g.hbm_bandwidth_bytes_per_s = 1 / slope;
    g.kernel_launch_overhead_s = intercept;
    fit.fitted_elementwise = true;
    fit.rows_used += static_cast<int64_t>(pts.size());
  } else {
    fit.notes.push_back("elementwise fit gave a non-physical line (slope or intercept < 0); kept the base "
                        "kernel_launch_overhead and hbm_bandwidth");
  }
}

// The peak rate a gemm row is measured against: the FP8 peak for fp8, else the dtype's share of the BF16 peak.
double gemm_peak(const MeasuredOpRow& r, const GpuSpec& g, const std::string& csv_path) {
  if (r.dtype == "fp8") {
    if (g.peak_fp8_flops_per_s <= 0)
      fail(csv_path, r.line, "dtype", "an fp8 GEMM, but the GPU " + g.name + " has no FP8 peak",
           "pass --gpu with an FP8-capable GPU (H100, H200, B200)");
    return g.peak_fp8_flops_per_s;
  }
  const auto d = parse_dtype(r.dtype);
  if (!d) fail(csv_path, r.line, "dtype", "unknown dtype '" + r.dtype + "'", "use bf16, fp16, fp32, fp64 or fp8");
  return g.peak_bf16_flops_per_s * peak_fraction(*d);
}

// Step 2. gemm_efficiency_bf16 / _fp8 = median over the BF16 (FP8) rows of flops / ((t − overhead) · peak ·
// gemm_shape_factor); uses the overhead fitted in step 1. The shape factor is divided out (when m, n, k are
// given) so that the fitted value is the large-GEMM efficiency the cost model scales from.
void fit_gemm_efficiency(const std::vector<MeasuredOpRow>& rows, const std::string& csv_path, CalibrationFit& fit) {
  GpuSpec& g = fit.gpu;
  std::vector<double> gemm_eff[2];  // [0] BF16 (and other non-FP8 dtypes), [1] FP8
  for (const auto& r : rows) {
    if (r.op_kind != "gemm") continue;
    const double peak = gemm_peak(r, g, csv_path);
    const bool fp8 = r.dtype == "fp8";
    const bool has_shape = r.m > 0 && r.n > 0 && r.k > 0;
    const double flops = r.flops > 0 ? r.flops : 2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k);
    if (flops <= 0) fail(csv_path, r.line, "flops", "a gemm row needs flops or m, n, k", "fill the flops column");
    const double busy = r.measured_s - g.kernel_launch_overhead_s;
    if (busy <= 0)
      fail(csv_path, r.line, "measured_s",
           fmt::format("gemm row: {:.4g} s is not above the kernel launch overhead ({:.4g} us{})", r.measured_s,
                       g.kernel_launch_overhead_s * 1e6, fit.fitted_elementwise ? ", fitted from the elementwise rows"
                                                                                 : " of " + g.name),
           kUnitsFix);
    const double rate = checked_rate(r, flops, busy, peak, g.name, csv_path);
    const double shape = has_shape ? gemm_shape_factor(r.m, r.n, r.k, fp8, g) : 1.0;
    gemm_eff[fp8 ? 1 : 0].push_back(std::min(1.0, rate / shape));
  }
  for (const int fp8 : {0, 1}) {
    const char* key = fp8 ? "gemm_efficiency_fp8" : "gemm_efficiency_bf16";
    if (gemm_eff[fp8].empty()) {
      fit.notes.push_back(std::string("no ") + (fp8 ? "fp8" : "bf16") + " gemm rows; kept the base " + key);
      continue;
    }
    const double eff = median(gemm_eff[fp8]);
    if (eff < plausible::kEfficiency.lo)
      fail(csv_path, 0, "measured_s",
           fmt::format("the {} gemm rows give an efficiency of {:.3g} of the large-GEMM peak, below the plausible {} "
                       "(the loader refuses it)",
                       fp8 ? "fp8" : "bf16", eff, plausible::kEfficiency.lo),
           kUnitsFix);
    (fp8 ? g.gemm_efficiency_fp8 : g.gemm_efficiency_bf16) = eff;
    (fp8 ? fit.fitted_gemm_fp8 : fit.fitted_gemm_bf16) = true;
    fit.rows_used += static_cast<int64_t>(gemm_eff[fp8].size());
  }
}

// The measured efficiencies of the `kind` rows (clamped to 1), grouped by table point; counts them as used.
AttentionPoints measured_attention_points(const std::vector<MeasuredOpRow>& rows, const std::string& kind,
                                          const std::string& csv_path, CalibrationFit& fit) {
  const GpuSpec& g = fit.gpu;
  AttentionPoints points;
  for (const auto& r : rows) {
    if (r.op_kind != kind) continue;
    if (r.head_dim < 1 || r.q_rows < 1 || r.kv_rows < 1 || r.flops <= 0)
      fail(csv_path, r.line, "head_dim", "an attention row needs head_dim, q_rows, kv_rows and flops",
           "fill those columns");
    const auto d = parse_dtype(r.dtype);
    if (!d) fail(csv_path, r.line, "dtype", "unknown dtype '" + r.dtype + "'", "use bf16, fp16, fp32 or fp64");
    const double eff = checked_rate(r, r.flops, r.measured_s, g.peak_bf16_flops_per_s * peak_fraction(*d), g.name,
                                    csv_path);
    points[{r.causal, r.head_dim, r.q_rows, r.kv_rows}].push_back(eff);
    ++fit.rows_used;
  }
  return points;
}

// Efficiency of a grid point that was not measured: the median of the nearest measured point of the same
// (causal, head_dim) in (log2 q_rows, log2 kv_rows).
double nearest_measured_efficiency(const AttentionPoints& points, bool causal, int64_t head_dim, int64_t q,
                                   int64_t kv) {
  double best = 1e300, eff = 0;
  for (const auto& [pk, pv] : points) {
    if (std::get<0>(pk) != causal || std::get<1>(pk) != head_dim) continue;
    const double dq = std::log2(static_cast<double>(std::get<2>(pk))) - std::log2(static_cast<double>(q));
    const double dkv = std::log2(static_cast<double>(std::get<3>(pk))) - std::log2(static_cast<double>(kv));
    const double dist = dq * dq + dkv * dkv;
    if (dist < best) {  // map order = (q, kv) ascending, so ties keep the smaller q, then kv
      best = dist;
      eff = median(pv);
    }
  }
  return eff;
}

// The full table: per (causal, head_dim) every q_rows × kv_rows of the measured axes, measured points as
// their median and the others filled from the nearest measured one (counted in the fit).
// Source: assumption: a measured sweep has a few dozen q_rows and kv_rows per head dim (ring-step chunk sizes), a
// few thousand grid points in all. Filling costs grid points × measured points, so without a bound a 37 KB CSV of
// 1000 distinct shapes took over a minute and wrote a million-point table.
constexpr size_t kMaxAttentionTablePoints = 16384;

std::vector<EfficiencyPoint> attention_table(const AttentionPoints& points, const std::string& kind,
                                             const std::string& csv_path, CalibrationFit& fit) {
  std::map<std::pair<bool, int64_t>, std::pair<std::set<int64_t>, std::set<int64_t>>> grids;
  for (const auto& [key, v] : points) {
    auto& gr = grids[{std::get<0>(key), std::get<1>(key)}];
    gr.first.insert(std::get<2>(key));
    gr.second.insert(std::get<3>(key));
  }
  size_t grid_points = 0;  // at most (rows)^2 <= 2^60: no overflow
  for (const auto& [gk, axes] : grids) grid_points += axes.first.size() * axes.second.size();
  if (grid_points > kMaxAttentionTablePoints)
    fail(csv_path, 0, kind,
         "the " + kind + " rows span " + std::to_string(grid_points) + " q_rows x kv_rows grid points, more than " +
             std::to_string(kMaxAttentionTablePoints),
         "measure fewer distinct q_rows and kv_rows per head dim (a sweep over the ring-step chunk sizes)");
  std::vector<EfficiencyPoint> table;
  for (const auto& [gk, axes] : grids) {
    for (int64_t q : axes.first) {
      for (int64_t kv : axes.second) {
        const auto it = points.find({gk.first, gk.second, q, kv});
        double eff = 0;
        if (it != points.end()) {
          eff = median(it->second);
          ++fit.attention_points;
        } else {
          eff = nearest_measured_efficiency(points, gk.first, gk.second, q, kv);
          ++fit.filled_points;
        }
        table.push_back(EfficiencyPoint{gk.second, q, kv, gk.first, eff});
      }
    }
  }
  return table;
}

// Table points below the plausible efficiency (plausible::kEfficiency, which the loader enforces) are raised to it
// with a note: blocks so small that the launch dominates. When every point is below it, the times are not in
// seconds (or not of this GPU). @throws InputError naming the CSV then.
void raise_low_points(std::vector<EfficiencyPoint>& table, const std::string& kind, const std::string& csv_path,
                      CalibrationFit& fit) {
  const double lo = plausible::kEfficiency.lo;
  int64_t low = 0;
  double lowest = 1;
  for (const EfficiencyPoint& p : table) {
    lowest = std::min(lowest, p.efficiency);
    if (p.efficiency < lo) ++low;
  }
  if (low == 0) return;
  if (low == static_cast<int64_t>(table.size()))
    fail(csv_path, 0, "measured_s",
         fmt::format("every {} point is below {} of the peak (lowest {:.3g})", kind, lo, lowest), kUnitsFix);
  for (EfficiencyPoint& p : table) p.efficiency = std::max(p.efficiency, lo);
  fit.notes.push_back(fmt::format("{} {} table point(s) below {} of the peak (lowest {:.3g}) raised to {}: blocks "
                                  "whose launch dominates",
                                  low, kind, lo, lowest, lo));
}

// Step 3. The attention table of one direction (kept from the base GPU when no row measures it).
void fit_attention_table(const std::vector<MeasuredOpRow>& rows, bool forward, const std::string& csv_path,
                         CalibrationFit& fit) {
  const std::string kind = forward ? "attn_fwd_block" : "attn_bwd_block";
  const AttentionPoints points = measured_attention_points(rows, kind, csv_path, fit);
  if (points.empty()) {
    fit.notes.push_back("no " + kind + " rows; kept the base " + (forward ? "forward" : "backward") + " efficiency");
    return;
  }
  std::vector<EfficiencyPoint> table = attention_table(points, kind, csv_path, fit);
  raise_low_points(table, kind, csv_path, fit);
  // A table replaces the preset's whole curve: with few points every block shape takes their efficiency.
  // Source: assumption: 4 points are the least that give a slope in both q_rows and kv_rows (2 x 2).
  constexpr size_t kFewPoints = 4;
  if (points.size() < kFewPoints)
    fit.notes.push_back(fmt::format("the {} table rests on {} measured shape{}: every block shape takes {} "
                                    "efficiency (measure a sweep of q_rows and kv_rows, e.g. the ring-step chunk "
                                    "sizes)",
                                    forward ? "forward" : "backward", points.size(), points.size() == 1 ? "" : "s",
                                    points.size() == 1 ? "its" : "their nearest one's"));
  (forward ? fit.gpu.attn_fwd_table : fit.gpu.attn_bwd_table) = std::move(table);
  (forward ? fit.fitted_attn_fwd : fit.fitted_attn_bwd) = true;
}

// Rows of kinds that calibrate no compute (communication) are counted as skipped.
int64_t count_skipped_rows(const std::vector<MeasuredOpRow>& rows) {
  int64_t skipped = 0;
  for (const auto& r : rows)
    if (!is_elementwise_kind(r.op_kind) && r.op_kind != "gemm" && r.op_kind != "attn_fwd_block" &&
        r.op_kind != "attn_bwd_block")
      ++skipped;
  return skipped;
}

// A note naming the head dims the attention tables cover (blocks of other head dims interpolate between them).
void note_table_head_dims(CalibrationFit& fit) {
  std::set<int64_t> head_dims;
  for (const auto& p : fit.gpu.attn_fwd_table) head_dims.insert(p.head_dim);
  for (const auto& p : fit.gpu.attn_bwd_table) head_dims.insert(p.head_dim);
  if (head_dims.empty()) return;
  std::string list;
  for (int64_t d : head_dims) list += (list.empty() ? "" : ", ") + std::to_string(d);
  fit.notes.push_back("attention tables cover head_dim " + list +
                      "; blocks of another head dim use the nearest one (linear between two)");
}

}  // namespace

CalibrationFit fit_calibration(const std::vector<MeasuredOpRow>& rows, const GpuSpec& base, const std::string& csv_path) {
  CalibrationFit fit;
  fit.gpu = base;
  fit_memory_bound(rows, csv_path, fit);
  fit_gemm_efficiency(rows, csv_path, fit);
  for (const bool forward : {true, false}) fit_attention_table(rows, forward, csv_path, fit);
  fit.rows_skipped = count_skipped_rows(rows);
  if (fit.rows_used == 0) {
    std::string why;  // the notes of the steps that kept their base values say why
    for (const auto& n : fit.notes) why += "; " + n;
    fail(csv_path, 0, "op_kind",
         fmt::format("no row can be fitted: {} row(s), {} of them communication{}", rows.size(), fit.rows_skipped, why),
         "measure attention blocks, GEMMs or elementwise kernels of at least two sizes");
  }
  note_table_head_dims(fit);
  fit.gpu.calibration = "calibrated from " + csv_path;
  return fit;
}

std::string calibration_yaml(const CalibrationFit& fit, const std::string& csv_path) {
  std::vector<std::string> comments{
      "hcpsim calibration: compute cost model fitted from measured per-op times.",
      fmt::format("rows used {}, skipped {} (communication), attention points {} measured + {} filled from a neighbour",
                  fit.rows_used, fit.rows_skipped, fit.attention_points, fit.filled_points)};
  for (const auto& n : fit.notes) comments.push_back("note: " + n);
  comments.push_back("Include it in a scenario with: cluster: {preset: ..., gpu: {calibration: THIS_FILE}}");
  return calibration_file_yaml(fit.gpu, csv_path, comments);
}

}  // namespace hcpsim::sim
