#include "plan_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "hcpsim/io/xml.hpp"

namespace hcpsim::app {

using sim::PlanOption;
using sim::PlanResult;

namespace {

/// A "nice" axis step (1, 2 or 5 × 10^k) giving about four intervals up to `vmax`.
double nice_step(double vmax) {
  const double raw = vmax / 4;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

}  // namespace

std::string plan_svg(const PlanResult& r, const std::string& title) {
  const double bar_w = 18, gap = 34, left = 70, top = 104, plot_h = 260;
  const double group_w = 3 * bar_w + gap;
  const double width = std::max(640.0, left + 20 + std::max<double>(1, static_cast<double>(r.ranked.size())) * group_w);
  const double height = top + plot_h + 120;
  double vmax = 0;
  for (const auto& o : r.ranked)
    vmax = std::max({vmax, static_cast<double>(o.step.layer_forward_ps), static_cast<double>(o.step.layer_backward_ps),
                     static_cast<double>(o.step.layer_exposed_comm_ps)});
  vmax = vmax > 0 ? vmax * 1e-9 : 1;  // ms
  const double tick = nice_step(vmax);
  const int ticks = static_cast<int>(std::ceil(vmax / tick - 1e-9));
  vmax = tick * ticks;
  std::string svg;
  svg += fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
      "width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" font-family=\"sans-serif\">\n",
      width, height, width, height);
  svg += fmt::format("<title>{}</title>\n", xml_escape(title));
  svg += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += fmt::format("<text x=\"{:.0f}\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{}</text>\n", left,
                     xml_escape(title));
  svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"11\" fill=\"#444444\">bars: one layer of one "
                     "micro-batch; above each group: rank, time per iteration, model TFLOP/s per GPU, memory per GPU "
                     "(red: does not fit)</text>\n",
                     left, top + plot_h + 108);
  const char* colors[3] = {"#4c72b0", "#dd8452", "#c44e52"};
  const char* names[3] = {"layer forward (ms)", "layer backward (ms)", "exposed comm per layer (ms)"};
  for (int i = 0; i < 3; ++i) {
    const double x = left + i * 190.0;
    svg += fmt::format("<rect x=\"{:.0f}\" y=\"34\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                       "<text x=\"{:.0f}\" y=\"45\" font-size=\"12\">{}</text>\n",
                       x, colors[i], x + 16, names[i]);
  }
  // Axis and grid: 4 ticks.
  svg += fmt::format("<line x1=\"{0:.0f}\" y1=\"{1:.0f}\" x2=\"{0:.0f}\" y2=\"{2:.0f}\" stroke=\"black\"/>\n", left, top,
                     top + plot_h);
  svg += fmt::format("<line x1=\"{0:.0f}\" y1=\"{1:.0f}\" x2=\"{2:.0f}\" y2=\"{1:.0f}\" stroke=\"black\"/>\n", left,
                     top + plot_h, width - 10);
  for (int t = 0; t <= ticks; ++t) {
    const double y = top + plot_h - plot_h * t / static_cast<double>(ticks);
    svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{:g}</text>\n", left - 6,
                       y + 4, tick * t);
    if (t > 0)
      svg += fmt::format("<line x1=\"{:.0f}\" y1=\"{:.1f}\" x2=\"{:.0f}\" y2=\"{:.1f}\" stroke=\"#dddddd\"/>\n", left, y,
                         width - 10, y);
  }
  svg += fmt::format("<text x=\"14\" y=\"{:.0f}\" font-size=\"12\" transform=\"rotate(-90 14 {:.0f})\" "
                     "text-anchor=\"middle\">ms per layer</text>\n",
                     top + plot_h / 2, top + plot_h / 2);
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const PlanOption& o = r.ranked[i];
    const double gx = left + 12 + static_cast<double>(i) * group_w;
    const double v[3] = {static_cast<double>(o.step.layer_forward_ps) * 1e-9,
                         static_cast<double>(o.step.layer_backward_ps) * 1e-9,
                         static_cast<double>(o.step.layer_exposed_comm_ps) * 1e-9};
    for (int b = 0; b < 3; ++b) {
      const double h = plot_h * v[b] / vmax;
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.1f}\" fill=\"{}\"/>\n",
                         gx + b * bar_w, top + plot_h - h, bar_w - 2, h, colors[b]);
    }
    const double cx = gx + 1.5 * bar_w;
    // Three short lines per group: a group is 88 px wide, one long line of 10 px text overlaps its neighbour's.
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.0f}\" font-size=\"10\" text-anchor=\"middle\">#{} {:.2f} s/iter</text>\n",
                       cx, top - 34, o.rank, static_cast<double>(o.step.step_ps) * 1e-12);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.0f}\" font-size=\"10\" text-anchor=\"middle\">{:.0f} TFLOP/s</text>\n",
                       cx, top - 22, o.step.model_tflops_per_gpu);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.0f}\" font-size=\"10\" text-anchor=\"middle\" fill=\"{}\">"
                       "{:.0f} GB</text>\n",
                       cx, top - 10, o.step.memory.fits ? "black" : "#c00000", o.step.memory.total_bytes / 1e9);
    svg += fmt::format("<text x=\"{0:.1f}\" y=\"{1:.0f}\" font-size=\"10\" text-anchor=\"end\" "
                       "transform=\"rotate(-40 {0:.1f} {1:.0f})\" fill=\"{2}\">{3}{4}</text>\n",
                       cx, top + plot_h + 14, o.step.memory.fits ? "black" : "#c00000", xml_escape(o.label),
                       o.step.memory.fits ? "" : " (does not fit)");
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace hcpsim::app
