#include "plan_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "svg_chart.hpp"

namespace hcpsim::app {

using sim::PlanOption;
using sim::PlanResult;

namespace {

// Layout constants (px). Source: readability choices; rows 22 px apart hold a 12 px label (14.4 px text box).
constexpr double kMargin = 16, kRowH = 22, kBarH = 14, kFont = 12, kSmall = 11, kTitleFont = 16;
constexpr double kTimeBars = 340, kMemBars = 220, kPanelGap = 28, kBadgeFont = 10;
constexpr const char* kWinnerColor = "#2ca02c";
constexpr const char* kFitColor = "#4c72b0";
constexpr const char* kNoFitFill = "url(#nofit)";
constexpr const char* kCapacityColor = "#d62728";
constexpr const char* kNoFitText = "#b00000";

/// Where everything goes, computed once from the options' texts.
struct Layout {
  double width = 0;
  double label_x = 0;                 ///< left edge of the labels (ranks are right-aligned before it)
  double time_x = 0, mem_x = 0;       ///< left edges of the two panels' bars
  double time_axis = 1, time_step = 1;  ///< axis maximum and tick step, in time_unit
  double mem_axis = 1, mem_step = 1;    ///< GB
  double time_scale = 1e-12;          ///< ps -> time_unit
  const char* time_unit = "s";
  int winner = -1;                    ///< index into ranked, −1: none
  sim::TimePs best_ps = 0;            ///< step time the others are compared with: the winner's, else rank 1's
};

// Options that do not fit have no rank (plan.hpp PlanOption::rank 0).
std::string rank_text(const PlanOption& o) { return o.rank > 0 ? fmt::format("#{}", o.rank) : std::string("-"); }

/// `v` with three significant digits, trailing zeros kept (25.0, 4.20, 128).
std::string three_digits(double v) {
  const int decimals = v > 0 ? std::clamp(2 - static_cast<int>(std::floor(std::log10(v))), 0, 3) : 0;
  return fmt::format("{:.{}f}", v, decimals);
}

/// "24.9 s (+0.6%), 390 TFLOP/s": the time per iteration, relative to the best option (`best_ps`, the winner or
/// rank 1) unless it is that option, and the model TFLOP/s per GPU.
std::string time_text(const PlanOption& o, const Layout& l, sim::TimePs best_ps) {
  const double t = static_cast<double>(o.step.step_ps);
  const std::string rel = o.step.step_ps == best_ps || best_ps <= 0
                              ? std::string()
                              : fmt::format(" ({:+.1f}%)", 100 * (t / static_cast<double>(best_ps) - 1));
  return fmt::format("{} {}{}, {:.0f} TFLOP/s", three_digits(t * l.time_scale), l.time_unit, rel,
                     o.step.model_tflops_per_gpu);
}

std::string memory_text(const PlanOption& o) { return fmt::format("{:.1f} GB", o.step.memory.total_bytes / 1e9); }

double badge_width() { return text_width("winner", kBadgeFont, true) + 8; }

Layout make_layout(const PlanResult& r, const std::string& title) {
  Layout l;
  for (size_t i = 0; i < r.ranked.size() && !r.nothing_fits; ++i)
    if (r.ranked[i].step.memory.fits) {
      l.winner = static_cast<int>(i);
      break;
    }
  if (!r.ranked.empty()) l.best_ps = r.ranked[static_cast<size_t>(std::max(l.winner, 0))].step.step_ps;
  double rank_w = 0, label_w = text_width("option", kFont, true), step_max = 0, mem_max = 0;
  for (const PlanOption& o : r.ranked) {
    rank_w = std::max(rank_w, text_width(rank_text(o), kFont));
    label_w = std::max(label_w, text_width(o.label, kFont, true));  // bold width: the winner's label is bold
    step_max = std::max(step_max, static_cast<double>(o.step.step_ps));
    mem_max = std::max({mem_max, o.step.memory.total_bytes / 1e9, o.step.memory.capacity_bytes / 1e9});
  }
  if (step_max < 1e12) {
    l.time_scale = 1e-9;
    l.time_unit = "ms";
  }
  l.time_step = nice_step(step_max * l.time_scale, 8);
  l.time_axis = std::max(1.0, std::ceil(step_max * l.time_scale / l.time_step - 1e-9)) * l.time_step;
  l.mem_step = nice_step(mem_max, 4);
  l.mem_axis = std::max(1.0, std::ceil(mem_max / l.mem_step - 1e-9)) * l.mem_step;
  double time_text_w = 0, mem_text_w = 0;
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const PlanOption& o = r.ranked[i];
    const double badge = static_cast<int>(i) == l.winner ? 6 + badge_width() : 0;
    time_text_w = std::max(time_text_w, text_width(time_text(o, l, l.best_ps), kSmall) + badge);
    mem_text_w = std::max(mem_text_w, text_width(memory_text(o) + ", does not fit", kSmall, true));
  }
  l.label_x = kMargin + rank_w + 6;
  l.time_x = l.label_x + label_w + 14;
  l.mem_x = l.time_x + kTimeBars + 5 + time_text_w + kPanelGap;
  l.width = std::max({l.mem_x + kMemBars + mem_text_w + 6 + kMargin, text_width(title, kTitleFont, true) + 2 * kMargin,
                      640.0});
  return l;
}

/// "; CP 16 in every option" when the options share CP (--cp), else "; 64 GPUs per model replica, CP = 64/(TP*PP)"
/// when they share TP*CP*PP (--gpus), else "" (each label then names its own sizes).
std::string replica_text(const PlanResult& r) {
  if (r.ranked.empty()) return "";
  const PlanOption& f = r.ranked.front();
  const int64_t gpus = f.tp * f.cp * f.pp;
  const bool same_gpus = std::all_of(r.ranked.begin(), r.ranked.end(),
                                     [&](const PlanOption& o) { return o.tp * o.cp * o.pp == gpus; });
  const bool same_cp = std::all_of(r.ranked.begin(), r.ranked.end(), [&](const PlanOption& o) { return o.cp == f.cp; });
  if (same_cp) return fmt::format("; CP {} in every option", f.cp);
  if (same_gpus) return fmt::format("; {} GPUs per model replica, CP = {}/(TP*PP)", gpus, gpus);
  return "";
}

/// Title, subtitle, "no option fits" and the legend; returns the elements, advances `y` (next baseline).
std::string header(const PlanResult& r, const Layout& l, const std::string& title, double& y) {
  std::string out = svg_text(kMargin, y, kTitleFont, TextAnchor::start, title, "font-weight=\"bold\"");
  y += 20;
  double capacity = 0;
  for (const PlanOption& o : r.ranked) capacity = std::max(capacity, o.step.memory.capacity_bytes);
  const std::string sub = fmt::format(
      "{} option{} ranked by {}; whole training step, global batch {}; GPU memory {:.1f} GB", r.ranked.size(),
      r.ranked.size() == 1 ? "" : "s",
      r.objective == sim::PlanRequest::Objective::time ? "time per iteration (options that fit first)"
                                                       : "memory per GPU",
      r.global_batch_size, capacity / 1e9) + replica_text(r);
  for (const std::string& line : wrap_text(sub, kFont, l.width - 2 * kMargin)) {
    out += svg_text(kMargin, y, kFont, TextAnchor::start, line, "fill=\"#333333\"");
    y += 17;
  }
  if (r.ranked.empty()) {
    out += svg_text(kMargin, y, kFont, TextAnchor::start, "no legal option to chart", "font-weight=\"bold\"");
    y += 17;
  } else if (l.winner < 0) {
    out += svg_text(kMargin, y, kFont, TextAnchor::start, "no option fits in GPU memory: no winner",
                    fmt::format("class=\"nothing-fits\" font-weight=\"bold\" fill=\"{}\"", kNoFitText));
    y += 17;
  }
  y += 4;
  std::vector<LegendItem> legend;
  if (l.winner >= 0)
    legend.push_back({kWinnerColor,
                      r.objective == sim::PlanRequest::Objective::time ? "winner: fastest option that fits"
                                                                       : "winner: least memory per GPU",
                      false});
  // Only the kinds of bar the chart draws.
  bool other_fits = false, no_fit = false;
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    other_fits = other_fits || (static_cast<int>(i) != l.winner && r.ranked[i].step.memory.fits);
    no_fit = no_fit || !r.ranked[i].step.memory.fits;
  }
  if (other_fits) legend.push_back({kFitColor, "fits", false});
  if (no_fit) legend.push_back({kNoFitFill, "does not fit in GPU memory", false});
  legend.push_back({kCapacityColor, "GPU memory capacity", true});
  out += svg_legend(legend, kMargin, l.width - kMargin, y);
  return out;
}

/// One option's row at index i, its rows' band from `top`.
std::string row(const PlanOption& o, int i, const Layout& l, double top) {
  const bool winner = i == l.winner, fits = o.step.memory.fits;
  const double base = top + kRowH / 2 + 0.36 * kFont, bar_y = top + (kRowH - kBarH) / 2;
  const std::string fill = winner ? kWinnerColor : fits ? kFitColor : kNoFitFill;
  std::string out;
  const std::string weight = winner ? "font-weight=\"bold\"" : fits ? "" : "fill=\"#555555\"";
  out += svg_text(l.label_x - 6, base, kFont, TextAnchor::end, rank_text(o), weight);
  out += svg_text(l.label_x, base, kFont, TextAnchor::start, o.label, weight);
  const double tw = kTimeBars * static_cast<double>(o.step.step_ps) * l.time_scale / l.time_axis;
  out += svg_rect(l.time_x, bar_y, tw, kBarH, fmt::format("fill=\"{}\"", fill));
  const std::string tt = time_text(o, l, l.best_ps);
  out += svg_text(l.time_x + tw + 5, base, kSmall, TextAnchor::start, tt);
  if (winner) {
    const double bx = l.time_x + tw + 5 + text_width(tt, kSmall) + 6;
    out += svg_rect(bx, top + 3, badge_width(), kRowH - 6, fmt::format("rx=\"3\" fill=\"{}\"", kWinnerColor));
    out += svg_text(bx + 4, base - 0.5, kBadgeFont, TextAnchor::start, "winner",
                    "class=\"winner\" font-weight=\"bold\" fill=\"white\"");
  }
  const double mw = kMemBars * o.step.memory.total_bytes / 1e9 / l.mem_axis;
  out += svg_rect(l.mem_x, bar_y, mw, kBarH, fmt::format("fill=\"{}\"", fill));
  const double cx = l.mem_x + kMemBars * o.step.memory.capacity_bytes / 1e9 / l.mem_axis;
  out += svg_line(cx, top, cx, top + kRowH,
                  fmt::format("stroke=\"{}\" stroke-width=\"1.5\" stroke-dasharray=\"3,2\"", kCapacityColor));
  // The value sits after its bar, or after the capacity line where it would cross it (a line through the digits
  // hides them exactly where the reader compares the bar with the capacity).
  const std::string text = fits ? memory_text(o) : memory_text(o) + ", does not fit";
  double tx = l.mem_x + mw + 5;
  if (tx < cx + 3 && tx + text_width(text, kSmall, !fits) > cx - 3) tx = cx + 5;
  if (fits)
    out += svg_text(tx, base, kSmall, TextAnchor::start, text);
  else
    out += svg_text(tx, base, kSmall, TextAnchor::start, text,
                    fmt::format("class=\"nofit\" font-weight=\"bold\" fill=\"{}\"", kNoFitText));
  return out;
}

/// A horizontal axis under a panel: line, ticks, grid lines up to `grid_top`, tick labels and the unit.
std::string axis(double x0, double bars_w, double axis_max, double step, double y, double grid_top,
                 const std::string& unit) {
  std::string out = svg_line(x0, y, x0 + bars_w, y, "stroke=\"black\"");
  const int ticks = static_cast<int>(std::lround(axis_max / step));
  for (int t = 0; t <= ticks; ++t) {
    const double x = x0 + bars_w * t / ticks;
    out += svg_line(x, grid_top, x, y, t == 0 ? "stroke=\"black\"" : "stroke=\"#d0d0d0\"");
    out += svg_line(x, y, x, y + 4, "stroke=\"black\"");
    out += svg_text(x, y + 16, kSmall, TextAnchor::middle, axis_label(step * t, step));
  }
  out += svg_text(x0 + bars_w / 2, y + 32, kSmall, TextAnchor::middle, unit);
  return out;
}

}  // namespace

std::string plan_svg(const PlanResult& r, const std::string& title) {
  const Layout l = make_layout(r, title);
  double y = 26;
  std::string body = header(r, l, title, y);
  const double heads = y + 4;
  body += svg_text(l.label_x, heads, kFont, TextAnchor::start, "option", "font-weight=\"bold\"");
  body += svg_text(l.time_x, heads, kFont, TextAnchor::start, "time per iteration, model TFLOP/s per GPU",
                   "font-weight=\"bold\"");
  body += svg_text(l.mem_x, heads, kFont, TextAnchor::start, "memory per GPU", "font-weight=\"bold\"");
  const double rows_top = heads + 8;
  std::string stripes, grid, rows;  // drawn in this order: stripes, then grid lines, then the rows over them
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const double top = rows_top + kRowH * static_cast<double>(i);
    if (i % 2 == 1) stripes += svg_rect(kMargin / 2, top, l.width - kMargin, kRowH, "fill=\"#f3f3f3\"");
    rows += row(r.ranked[i], static_cast<int>(i), l, top);
  }
  const double axis_y = rows_top + kRowH * static_cast<double>(r.ranked.size()) + 2;
  grid += axis(l.time_x, kTimeBars, l.time_axis, l.time_step, axis_y, rows_top,
               std::string(l.time_unit) + " per iteration");
  grid += axis(l.mem_x, kMemBars, l.mem_axis, l.mem_step, axis_y, rows_top, "GB per GPU");
  y = axis_y + 54;
  std::string caption;
  const std::string note =
      "Time per iteration: the simulated layer composed into the whole training step (pipeline, data-parallel "
      "collectives, optimizer) for the same global batch; TFLOP/s: model FLOPs per GPU (Megatron's causal count). "
      "Memory per GPU: the stage that needs the most. Rows in rank order. (+x%): time per iteration above " +
      std::string(l.winner >= 0 ? "the winner's" : "the first row's (no option fits, so there is no winner)") + ".";
  for (const std::string& line : wrap_text(note, kSmall, l.width - 2 * kMargin)) {
    caption += svg_text(kMargin, y, kSmall, TextAnchor::start, line, "fill=\"#444444\"");
    y += 15;
  }
  std::string svg = svg_open(l.width, y, title);
  svg += "<defs><pattern id=\"nofit\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" "
         "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#d9d9d9\"/>"
         "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#8c8c8c\" stroke-width=\"2.5\"/></pattern></defs>\n";
  svg += body + stripes + grid + rows + caption + "</svg>\n";
  return svg;
}

}  // namespace hcpsim::app
