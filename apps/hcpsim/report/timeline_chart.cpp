#include "timeline_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "svg_chart.hpp"

namespace hcpsim::app {

using sim::SimResult;
using sim::TimelineEntry;

namespace {

// Layout constants (px). Source: readability choices; a 13 px lane holds a 9 px label (10.8 px text box).
constexpr double kMargin = 16, kPlotW = 960, kLaneH = 13, kBarH = 11, kGpuGap = 6, kLaneFont = 10, kBarFont = 9;
constexpr double kTitleFont = 16, kFont = 12, kSmall = 11;
constexpr const char* kForwardFlow = "#17becf";
constexpr const char* kBackwardFlow = "#bcbd22";
constexpr const char* kBackwardMark = "backward starts (first GPU)";
constexpr double kFlowOpacity = 0.6;  ///< messages overlap on a link lane; the darker overlap shows it

/// Fill and label colour of an op kind (alloc and free take no time and are not drawn).
struct KindStyle {
  const char* fill;
  const char* text;
};

KindStyle kind_style(OpKind k) {
  switch (k) {
    case OpKind::attn_fwd_block: return {"#4c72b0", "white"};
    case OpKind::attn_bwd_block: return {"#2a4d80", "white"};
    case OpKind::lse_merge: return {"#8172b3", "white"};
    case OpKind::out_correction: return {"#8c564b", "white"};  // brown: apart from lse_merge's purple
    case OpKind::copy: return {"#9d9d9d", "black"};
    case OpKind::gemm: return {"#55a868", "white"};
    case OpKind::elementwise: return {"#ccb974", "black"};
    case OpKind::send_recv: return {"#f0a35e", "black"};
    case OpKind::all_to_all: return {"#e15759", "white"};
    case OpKind::all_gather: return {"#64b5cd", "black"};
    case OpKind::reduce_scatter: return {"#ff9da7", "black"};
    case OpKind::alloc:
    case OpKind::free: break;
  }
  return {"#cccccc", "black"};
}

/// One horizontal lane: a GPU stream (rank ≥ 0, link −1) or a link (link ≥ 0).
struct Lane {
  std::string label;
  int64_t rank = -1;
  Stream stream = Stream::compute;
  int64_t link = -1;
  bool group_start = false;  ///< first lane of a GPU (or of the links between GPUs): a gap above it
};

/// What the chart shows and leaves out.
struct LaneSet {
  std::vector<Lane> lanes;
  size_t shown_gpus = 0;
  size_t fabric_links = 0;  ///< links between GPUs that carried traffic
  size_t fabric_shown = 0;
};

std::string link_label(const SimResult& r, int64_t link) {
  const sim::LinkStats& ls = r.links[static_cast<size_t>(link)];
  return "link " + ls.from + " -> " + ls.to;
}

LaneSet make_lanes(const SimResult& r, size_t max_gpus) {
  LaneSet set;
  set.shown_gpus = std::min(r.ranks.size(), max_gpus);
  std::array<bool, kStreamCount> used{};
  for (const TimelineEntry& e : r.timeline)
    if (static_cast<size_t>(e.cp_rank) < set.shown_gpus && e.end_ps > e.start_ps) used[static_cast<size_t>(e.stream)] = true;
  std::vector<std::set<int64_t>> out_links(set.shown_gpus);
  std::set<int64_t> end_hops;
  for (const sim::FlowRecord& f : r.flows) {
    if (f.route.empty()) continue;
    if (static_cast<size_t>(f.src_cp_rank) < set.shown_gpus) out_links[static_cast<size_t>(f.src_cp_rank)].insert(f.route.front());
    end_hops.insert(f.route.front());
    end_hops.insert(f.route.back());
  }
  for (size_t g = 0; g < set.shown_gpus; ++g) {
    const sim::RankStats& rs = r.ranks[g];
    const std::string gpu = fmt::format("gpu {} (cp {}) ", rs.gpu, rs.cp_rank);
    bool first = true;
    for (int s = 0; s < kStreamCount; ++s) {
      if (!used[static_cast<size_t>(s)]) continue;
      set.lanes.push_back(Lane{gpu + to_string(static_cast<Stream>(s)), rs.cp_rank, static_cast<Stream>(s), -1, first});
      first = false;
    }
    for (const int64_t l : out_links[g]) {
      set.lanes.push_back(Lane{link_label(r, l), -1, Stream::compute, l, first});
      first = false;
    }
  }
  std::vector<int64_t> fabric;
  for (size_t l = 0; l < r.links.size(); ++l)
    if (r.links[l].flows > 0 && end_hops.count(static_cast<int64_t>(l)) == 0) fabric.push_back(static_cast<int64_t>(l));
  set.fabric_links = fabric.size();
  std::stable_sort(fabric.begin(), fabric.end(), [&r](int64_t a, int64_t b) {
    return r.links[static_cast<size_t>(a)].bytes > r.links[static_cast<size_t>(b)].bytes;
  });
  fabric.resize(std::min(fabric.size(), kTimelineMaxFabricLinks));
  std::sort(fabric.begin(), fabric.end());
  set.fabric_shown = fabric.size();
  for (size_t i = 0; i < fabric.size(); ++i)
    set.lanes.push_back(Lane{link_label(r, fabric[i]), -1, Stream::compute, fabric[i], i == 0});
  return set;
}

/// Time unit of the axis: ms from 1 ms up, else µs.
struct TimeAxis {
  double scale = 1e-6;  ///< ps -> unit
  const char* unit = "\u00b5s";
  double step = 1, max = 1;  ///< tick step and the plot's end (the layer's total), in unit
};

TimeAxis time_axis(sim::TimePs total) {
  TimeAxis a;
  if (total >= 1'000'000'000) {
    a.scale = 1e-9;
    a.unit = "ms";
  }
  const double t = std::max(1.0, static_cast<double>(total)) * a.scale;
  a.step = nice_step(t, 10);
  a.max = t;  // the plot ends with the layer; ticks at the multiples of `step` up to it
  return a;
}

/// Three significant digits, trailing zeros kept (49.0 ms, not 49 ms), in ms from 1 ms up, else µs.
std::string format_time(sim::TimePs ps) {
  const double v = static_cast<double>(ps);
  const double x = v >= 1e9 ? v * 1e-9 : v * 1e-6;
  const int decimals = x >= 100 ? 0 : (x >= 10 ? 1 : 2);
  return fmt::format("{:.{}f} {}", x, decimals, v >= 1e9 ? "ms" : "\u00b5s");
}

/// The legend: op kinds drawn (in OpKind order), then the two flow colours.
std::vector<LegendItem> legend_items(const SimResult& r, size_t shown_gpus) {
  std::set<int> kinds;
  for (const TimelineEntry& e : r.timeline)
    if (static_cast<size_t>(e.cp_rank) < shown_gpus && e.end_ps > e.start_ps) kinds.insert(static_cast<int>(e.kind));
  std::vector<LegendItem> items;
  for (const int k : kinds) items.push_back({kind_style(static_cast<OpKind>(k)).fill, to_string(static_cast<OpKind>(k)), false});
  items.push_back({kForwardFlow, "link message, forward", false, kFlowOpacity});
  items.push_back({kBackwardFlow, "link message, backward", false, kFlowOpacity});
  return items;
}

/// Bars of the ops and messages of every lane; `lane_y` holds each lane's top.
std::string bars(const SimResult& r, const LaneSet& set, const std::vector<double>& lane_y, double x0, double px_per_ps) {
  std::map<std::pair<int64_t, int>, size_t> stream_lane;
  std::map<int64_t, size_t> link_lane;
  for (size_t i = 0; i < set.lanes.size(); ++i) {
    const Lane& ln = set.lanes[i];
    if (ln.link >= 0) link_lane.emplace(ln.link, i);
    else stream_lane.emplace(std::make_pair(ln.rank, static_cast<int>(ln.stream)), i);
  }
  std::string out;
  for (const TimelineEntry& e : r.timeline) {
    const auto it = stream_lane.find({e.cp_rank, static_cast<int>(e.stream)});
    if (it == stream_lane.end() || e.end_ps <= e.start_ps) continue;
    const KindStyle st = kind_style(e.kind);
    const double x = x0 + static_cast<double>(e.start_ps) * px_per_ps;
    const double w = std::max(0.5, static_cast<double>(e.end_ps - e.start_ps) * px_per_ps);
    const double top = lane_y[it->second] + (kLaneH - kBarH) / 2;
    out += svg_rect(x, top, w, kBarH, fmt::format("fill=\"{}\"", st.fill));
    if (text_width(e.label.str(), kBarFont) + 4 <= w)
      out += svg_text(x + w / 2, top + kBarH / 2 + 0.35 * kBarFont, kBarFont, TextAnchor::middle, e.label.str(),
                      fmt::format("fill=\"{}\"", st.text));
  }
  for (const sim::FlowRecord& f : r.flows) {
    const double x = x0 + static_cast<double>(f.start_ps) * px_per_ps;
    const double w = std::max(0.5, static_cast<double>(f.drained_ps - f.start_ps) * px_per_ps);
    for (const int64_t l : f.route) {
      const auto it = link_lane.find(l);
      if (it == link_lane.end()) continue;
      out += svg_rect(x, lane_y[it->second] + (kLaneH - kBarH) / 2, w, kBarH,
                      fmt::format("fill=\"{}\" fill-opacity=\"{}\"",
                                  f.phase == Phase::forward ? kForwardFlow : kBackwardFlow, kFlowOpacity));
    }
  }
  return out;
}

/// "forward" at the start and, with a backward, a dashed line where the first GPU starts it, labelled "backward
/// starts (first GPU)" (the other GPUs may still be finishing their forward; the forward label is left out when the
/// two would overlap: a very short forward).
std::string phase_marks(const SimResult& r, double x0, double marker_y, double axis_y, double px_per_ps) {
  const std::string fwd_text = svg_text(x0, marker_y, kSmall, TextAnchor::start, "forward", "font-weight=\"bold\"");
  if (r.backward_ps <= 0) return fwd_text;
  const double xb = x0 + static_cast<double>(r.backward_start_ps) * px_per_ps;
  const bool room = xb + 3 + text_width(kBackwardMark, kSmall, true) <= x0 + kPlotW;
  const double bx = room ? xb + 3 : xb - 3;
  const TextAnchor anchor = room ? TextAnchor::start : TextAnchor::end;
  std::string out = svg_line(xb, marker_y + 4, xb, axis_y, "stroke=\"black\" stroke-dasharray=\"4,3\"");
  out += svg_text(bx, marker_y, kSmall, anchor, kBackwardMark, "font-weight=\"bold\"");
  if (!boxes_overlap(text_box(x0, marker_y, kSmall, TextAnchor::start, "forward", true),
                     text_box(bx, marker_y, kSmall, anchor, kBackwardMark, true)))
    out += fwd_text;
  return out;
}

}  // namespace

std::string timeline_svg(const SimResult& r, const std::string& title, size_t max_gpus) {
  const LaneSet set = make_lanes(r, max_gpus);
  double label_w = 0;
  for (const Lane& ln : set.lanes) label_w = std::max(label_w, text_width(ln.label, kLaneFont));
  const double x0 = kMargin + label_w + 10;
  const double width = std::max(x0 + kPlotW + kMargin, text_width(title, kTitleFont, true) + 2 * kMargin);
  const TimeAxis ax = time_axis(r.total_ps);
  const double px_per_ps = kPlotW / (ax.max / ax.scale);
  double y = 26;
  std::string head = svg_text(kMargin, y, kTitleFont, TextAnchor::start, title, "font-weight=\"bold\"");
  y += 20;
  const std::string sub = fmt::format("{} [A={}, P={}], one attention layer of one TP rank: forward {}, backward {} "
                                      "(each the slowest GPU's; GPUs enter the backward at different times, so the "
                                      "two overlap), total {}; {} of {} GPUs shown",
                                      to_string(r.cp_comm_type), r.a2a_size, r.p2p_size, format_time(r.forward_ps),
                                      format_time(r.backward_ps), format_time(r.total_ps), set.shown_gpus,
                                      r.ranks.size());
  for (const std::string& line : wrap_text(sub, kFont, width - 2 * kMargin)) {
    head += svg_text(kMargin, y, kFont, TextAnchor::start, line, "fill=\"#333333\"");
    y += 17;
  }
  y += 2;
  head += svg_legend(legend_items(r, set.shown_gpus), kMargin, width - kMargin, y);
  const double marker_y = y + 2;  // baseline of the phase labels above the lanes
  std::vector<double> lane_y;
  double ly = marker_y + 6;
  std::string lanes;
  for (const Lane& ln : set.lanes) {
    if (ln.group_start) ly += kGpuGap;
    lane_y.push_back(ly);
    if (ln.group_start) lanes += svg_line(kMargin, ly - kGpuGap / 2, x0 + kPlotW, ly - kGpuGap / 2, "stroke=\"#bbbbbb\"");
    lanes += svg_text(x0 - 8, ly + kLaneH / 2 + 0.36 * kLaneFont, kLaneFont, TextAnchor::end, ln.label,
                      ln.link >= 0 ? "fill=\"#555555\"" : "");
    ly += kLaneH;
  }
  const double axis_y = ly + 4;
  std::string grid;
  const int ticks = static_cast<int>(std::floor(ax.max / ax.step + 1e-9));
  for (int t = 0; t <= ticks; ++t) {
    const double x = x0 + kPlotW * ax.step * t / ax.max;
    grid += svg_line(x, marker_y + 6, x, axis_y + 4, t == 0 ? "stroke=\"black\"" : "stroke=\"#e0e0e0\"");
    grid += svg_text(x, axis_y + 16, kSmall, TextAnchor::middle, axis_label(ax.step * t, ax.step));
  }
  grid += svg_line(x0, axis_y, x0 + kPlotW, axis_y, "stroke=\"black\"");
  grid += svg_text(x0 + kPlotW / 2, axis_y + 32, kSmall, TextAnchor::middle, std::string("time (") + ax.unit + ")");
  const std::string marks = phase_marks(r, x0, marker_y, axis_y, px_per_ps);
  y = axis_y + 54;
  std::string caption;
  const std::string note = fmt::format(
      "Lanes: the streams of each GPU (compute = Transformer Engine's current stream, cp_stream, comm = NCCL's "
      "stream; a comm op lasts from when it is reached, its rendezvous wait included) and the links out of each GPU "
      "that carried its messages (one translucent bar per message, first byte to last). {}{}",
      set.shown_gpus < r.ranks.size()
          ? fmt::format("Only the first {} of {} GPUs (CP ranks 0 to {}) are shown. ", set.shown_gpus, r.ranks.size(),
                        set.shown_gpus - 1)
          : std::string(),
      set.fabric_links > 0 ? fmt::format("Network and switch links (not at a GPU): the {} busiest of {}.", set.fabric_shown,
                                                   set.fabric_links)
                           : std::string());
  for (const std::string& line : wrap_text(note, kSmall, width - 2 * kMargin)) {
    caption += svg_text(kMargin, y, kSmall, TextAnchor::start, line, "fill=\"#444444\"");
    y += 15;
  }
  return svg_open(width, y, title) + head + grid + lanes + bars(r, set, lane_y, x0, px_per_ps) + marks + caption +
         "</svg>\n";
}

}  // namespace hcpsim::app
