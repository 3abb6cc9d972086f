// The SVG charts (plan chart, simulate timeline): every <text> box (estimated as the charts lay them out) lies
// inside the viewport and overlaps no other, the winner is marked once on the first option that fits (never when
// nothing fits), options that do not fit are marked, and rsvg-convert (Debian librsvg2-bin) renders each chart
// to a PNG of the SVG's size.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../../apps/hcpsim/report/plan_chart.hpp"
#include "../../apps/hcpsim/report/svg_chart.hpp"
#include "../../apps/hcpsim/report/timeline_chart.hpp"
#include "apps/run_command.hpp"
#include "catch_compat.hpp"

namespace hcpsim::app {
namespace {

/// One <text> element of a chart.
struct SvgText {
  double x = 0, y = 0, size = 0;
  TextAnchor anchor = TextAnchor::start;
  bool bold = false;
  std::string cls, text;
  TextBox box;
};

struct ParsedSvg {
  double width = 0, height = 0;
  std::vector<SvgText> texts;
};

std::string unescape(std::string s) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}}) {
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  }
  return s;
}

ParsedSvg parse_svg(const std::string& svg) {
  ParsedSvg out;
  std::smatch m;
  REQUIRE(std::regex_search(svg, m, std::regex("<svg [^>]*width=\"([0-9.]+)\" height=\"([0-9.]+)\"")));
  out.width = std::stod(m[1]);
  out.height = std::stod(m[2]);
  const std::regex text_re("<text([^>]*)>([^<]*)</text>"), attr_re("([a-z-]+)=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text_re); it != std::sregex_iterator(); ++it) {
    std::map<std::string, std::string> attrs;
    const std::string a = (*it)[1];
    for (auto at = std::sregex_iterator(a.begin(), a.end(), attr_re); at != std::sregex_iterator(); ++at)
      attrs[(*at)[1]] = (*at)[2];
    REQUIRE(attrs.count("x"));
    REQUIRE(attrs.count("y"));
    REQUIRE(attrs.count("font-size"));  // the charts set it on every text: no inherited size to guess
    REQUIRE(attrs.count("transform") == 0);
    SvgText t;
    t.x = std::stod(attrs["x"]);
    t.y = std::stod(attrs["y"]);
    t.size = std::stod(attrs["font-size"]);
    t.anchor = attrs["text-anchor"] == "middle" ? TextAnchor::middle
               : attrs["text-anchor"] == "end"  ? TextAnchor::end
                                                : TextAnchor::start;
    t.bold = attrs["font-weight"] == "bold";
    t.cls = attrs["class"];
    t.text = unescape((*it)[2]);
    t.box = text_box(t.x, t.y, t.size, t.anchor, t.text, t.bold);
    out.texts.push_back(t);
  }
  return out;
}

/// Every text box inside the viewport, no two overlapping (the first offending pair is reported).
void check_text_layout(const ParsedSvg& p) {
  REQUIRE(!p.texts.empty());
  for (const SvgText& t : p.texts) {
    INFO("text '" << t.text << "' box [" << t.box.x0 << ", " << t.box.x1 << "] x [" << t.box.y0 << ", " << t.box.y1
                  << "] in " << p.width << " x " << p.height);
    CHECK(t.box.x0 >= 0);
    CHECK(t.box.y0 >= 0);
    CHECK(t.box.x1 <= p.width);
    CHECK(t.box.y1 <= p.height);
  }
  int overlaps = 0;
  for (size_t i = 0; i < p.texts.size(); ++i)
    for (size_t j = i + 1; j < p.texts.size(); ++j)
      if (boxes_overlap(p.texts[i].box, p.texts[j].box) && overlaps++ == 0)
        FAIL_CHECK("'" << p.texts[i].text << "' overlaps '" << p.texts[j].text << "'");
  CHECK(overlaps == 0);
}

size_t count_class(const ParsedSvg& p, const std::string& cls) {
  return static_cast<size_t>(std::count_if(p.texts.begin(), p.texts.end(), [&](const SvgText& t) { return t.cls == cls; }));
}

/// n options with labels up to 48 characters; every third does not fit (or none fits); ranked as plan ranks them
/// (options that fit by step time, then the others).
sim::PlanResult synthetic_plan(int n, bool none_fits) {
  sim::PlanResult r;
  r.global_batch_size = 64;
  for (int i = 0; i < n; ++i) {
    sim::PlanOption o;
    o.label = i % 2 == 0 ? fmt::format("a2a+p2p [{},{}] TP{} PP2 VP2 full-block4 mbs2 x{:02d}", 2 + i % 3, 8, 1 << (i % 3), i)
                         : fmt::format("p2p TP{} #{}", 1 << (i % 4), i);
    o.step.step_ps = static_cast<sim::TimePs>((4.0 + 0.37 * ((i * 7) % n)) * 1e12);
    o.step.model_tflops_per_gpu = 600.0 / (4.0 + 0.37 * ((i * 7) % n)) * 4;
    o.step.memory.capacity_bytes = 80e9;
    o.step.memory.total_bytes = none_fits || i % 3 == 2 ? 81e9 + 7e9 * (i % 5) : 20e9 + 3e9 * (i % 17);
    o.step.memory.fits = o.step.memory.total_bytes <= o.step.memory.capacity_bytes;
    r.ranked.push_back(o);
  }
  std::stable_sort(r.ranked.begin(), r.ranked.end(), [](const sim::PlanOption& a, const sim::PlanOption& b) {
    if (a.step.memory.fits != b.step.memory.fits) return a.step.memory.fits;
    return a.step.step_ps < b.step.step_ps;
  });
  for (size_t i = 0; i < r.ranked.size(); ++i) r.ranked[i].rank = static_cast<int>(i) + 1;
  r.nothing_fits = none_fits;
  return r;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / fmt::format("{}_{}", getpid(), name)).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Renders `svg` with rsvg-convert and checks the PNG's size (its IHDR chunk) against the SVG's.
void check_png_render(const std::string& name, const std::string& svg) {
  const ParsedSvg p = parse_svg(svg);
  const std::string in = write_temp(name + ".svg", svg), png = in.substr(0, in.size() - 4) + ".png";
  std::filesystem::remove(png);
  const auto run = test::run_command(fmt::format("rsvg-convert -o '{}' '{}'", png, in));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const std::string bytes = read_file(png);
  REQUIRE(bytes.size() > 1000);
  REQUIRE(bytes.substr(1, 3) == "PNG");
  const auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) v = v << 8 | static_cast<unsigned char>(bytes[at + k]);
    return static_cast<double>(v);
  };
  CHECK(be32(16) == p.width);
  CHECK(be32(20) == p.height);
  std::filesystem::remove(in);
  std::filesystem::remove(png);
}

/// A hand-made result: `ranks` GPUs, each with a compute, a cp_stream and a comm op, one message per rank.
sim::SimResult synthetic_timeline(int ranks) {
  sim::SimResult r;
  r.cp_comm_type = CpCommType::p2p;
  r.p2p_size = ranks;
  r.forward_ps = 40'000'000;
  r.backward_start_ps = 40'000'000;
  r.backward_ps = 60'000'000;
  r.total_ps = 100'000'000;
  for (int g = 0; g < ranks; ++g) {
    sim::RankStats rs;
    rs.cp_rank = g;
    rs.gpu = g;
    r.ranks.push_back(rs);
    sim::LinkStats ls;
    ls.from = fmt::format("n0.gpu{}", g);
    ls.to = "n0.nvswitch";
    ls.flows = 1;
    ls.bytes = 1000;
    r.links.push_back(ls);
    const auto entry = [&](Stream s, OpKind k, sim::TimePs a, sim::TimePs b, const char* label) {
      return sim::TimelineEntry{.cp_rank = g, .stream = s, .kind = k, .start_ps = a, .end_ps = b, .label = label};
    };
    r.timeline.push_back(entry(Stream::compute, OpKind::attn_fwd_block, 0, 40'000'000, "attention forward block"));
    r.timeline.push_back(entry(Stream::cp, OpKind::lse_merge, 30'000'000, 31'000'000, "a merge label far too long"));
    r.timeline.push_back(entry(Stream::comm, OpKind::send_recv, 0, 20'000'000, "ring send"));
    r.timeline.push_back(entry(Stream::compute, OpKind::attn_bwd_block, 40'000'000, 100'000'000, "attention backward"));
    sim::FlowRecord f;
    f.src_cp_rank = g;
    f.dst_cp_rank = (g + 1) % ranks;
    f.start_ps = 1'000'000;
    f.drained_ps = 15'000'000;
    f.route = {g};
    r.flows.push_back(f);
  }
  return r;
}

TEST_CASE("plan chart: no overlapping text, winner and non-fitting options marked, 3 to 40 options", "[apps][chart]") {
  double last_height = 0;
  for (const int n : {3, 12, 40}) {
    INFO(n << " options");
    const sim::PlanResult r = synthetic_plan(n, false);
    const std::string svg = plan_svg(r, "hcpsim plan: synthetic");
    const ParsedSvg p = parse_svg(svg);
    check_text_layout(p);
    CHECK(p.height > last_height);  // rows, not squeezed text: the chart grows with the options
    last_height = p.height;
    REQUIRE(count_class(p, "winner") == 1);
    CHECK(count_class(p, "nothing-fits") == 0);
    const auto winner = std::find_if(p.texts.begin(), p.texts.end(), [](const SvgText& t) { return t.cls == "winner"; });
    // The badge sits on the row of the rank-1 option (which fits): the label drawn bold on the same row.
    const auto label = std::find_if(p.texts.begin(), p.texts.end(), [&](const SvgText& t) {
      return t.text == r.ranked[0].label && std::abs(t.y - winner->y) < 2;
    });
    REQUIRE(label != p.texts.end());
    CHECK(label->bold);
    CHECK(r.ranked[0].step.memory.fits);
    size_t no_fit = 0;
    for (const auto& o : r.ranked) no_fit += o.step.memory.fits ? 0 : 1;
    CHECK(no_fit == static_cast<size_t>(n / 3));
    CHECK(count_class(p, "nofit") == no_fit);
    // Every option's row says its time per iteration and TFLOP/s; labels end before the bars start.
    const auto time_head = std::find_if(p.texts.begin(), p.texts.end(),
                                        [](const SvgText& t) { return t.text.rfind("time per iteration", 0) == 0; });
    REQUIRE(time_head != p.texts.end());
    for (const auto& o : r.ranked) {
      // Three significant digits (the synthetic times lie in [4, 19) s), then the change against the winner.
      const double sec = static_cast<double>(o.step.step_ps) * 1e-12;
      const double ratio = static_cast<double>(o.step.step_ps) / static_cast<double>(r.ranked[0].step.step_ps);
      const std::string rel = o.rank == 1 ? "" : fmt::format(" ({:+.1f}%)", 100 * (ratio - 1));
      const std::string tt = fmt::format("{:.{}f} s{}, {:.0f} TFLOP/s", sec, sec < 10 ? 2 : 1, rel,
                                         o.step.model_tflops_per_gpu);
      INFO(tt);
      CHECK(std::count_if(p.texts.begin(), p.texts.end(), [&](const SvgText& t) { return t.text == tt; }) >= 1);
      const auto lt = std::find_if(p.texts.begin(), p.texts.end(), [&](const SvgText& t) { return t.text == o.label; });
      REQUIRE(lt != p.texts.end());
      CHECK(lt->box.x1 < time_head->box.x0);
    }
    CHECK(svg == plan_svg(r, "hcpsim plan: synthetic"));  // deterministic
  }
}

TEST_CASE("plan chart: nothing fits marks no winner and says so", "[apps][chart]") {
  const sim::PlanResult r = synthetic_plan(12, true);
  const ParsedSvg p = parse_svg(plan_svg(r, "hcpsim plan: nothing fits"));
  check_text_layout(p);
  CHECK(count_class(p, "winner") == 0);
  REQUIRE(count_class(p, "nothing-fits") == 1);
  CHECK(count_class(p, "nofit") == 12);
  const auto says = std::find_if(p.texts.begin(), p.texts.end(), [](const SvgText& t) { return t.cls == "nothing-fits"; });
  CHECK(says->text.find("no option fits") != std::string::npos);
}

TEST_CASE("timeline chart of a real simulation: lanes per GPU stream and link, no overlapping text", "[apps][chart]") {
  const std::string path = write_temp("hcpsim_chart_test_sim.svg", "");
  std::filesystem::remove(path);
  const auto run = test::run_hcpsim("simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml --timeline-svg '" + path + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("wrote timeline chart " + path) != std::string::npos);
  const std::string svg = read_file(path);
  const ParsedSvg p = parse_svg(svg);
  check_text_layout(p);
  size_t compute_lanes = 0, link_lanes = 0, bar_labels = 0;
  for (const SvgText& t : p.texts) {
    if (std::regex_match(t.text, std::regex("gpu [0-9]+ \\(cp [0-3]\\) compute"))) ++compute_lanes;
    if (t.text.rfind("link ", 0) == 0) ++link_lanes;
    if (t.size == 9) ++bar_labels;
  }
  CHECK(compute_lanes == 4);  // CP = 4: every GPU shown
  CHECK(link_lanes >= 4);     // each GPU sends over at least one link
  CHECK(bar_labels > 0);      // some ops are wide enough for their label
  CHECK(std::count_if(p.texts.begin(), p.texts.end(),
                      [](const SvgText& t) { return t.text == "backward starts (first GPU)"; }) == 1);
  CHECK(std::count_if(p.texts.begin(), p.texts.end(), [](const SvgText& t) { return t.text == "attn_fwd_block"; }) == 1);
  std::filesystem::remove(path);
  if (test::run_command("command -v rsvg-convert").exit_code == 0) check_png_render("hcpsim_chart_test_sim", svg);
}

TEST_CASE("timeline chart: at most max_gpus GPUs, labels only inside bars they fit", "[apps][chart]") {
  const sim::SimResult r = synthetic_timeline(5);
  const ParsedSvg p = parse_svg(timeline_svg(r, "synthetic", 2));
  check_text_layout(p);
  size_t lanes = 0, fwd_labels = 0, long_labels = 0;
  for (const SvgText& t : p.texts) {
    if (t.text.rfind("gpu ", 0) == 0) ++lanes;
    if (t.text == "attention forward block") ++fwd_labels;
    if (t.text == "a merge label far too long") ++long_labels;
  }
  CHECK(lanes == 6);  // GPUs 0 and 1, three streams each
  CHECK(fwd_labels == 2);
  CHECK(long_labels == 0);  // a 1 us merge in a 100 us chart has no room for its label
  CHECK(timeline_svg(r, "synthetic", 2).find("Only the first 2 of 5 GPUs") != std::string::npos);
}

TEST_CASE("the text width estimate bounds what rsvg-convert draws for the charts' texts", "[apps][chart]") {
  if (test::run_command("command -v rsvg-convert && command -v python3").exit_code != 0)
    TEST_SKIP_BECAUSE("rsvg-convert (Debian librsvg2-bin) or python3 is not installed: the estimate is not checked");
  if (!std::filesystem::exists("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"))
    TEST_SKIP_BECAUSE("DejaVu Sans (Debian fonts-dejavu-core), the font the estimate bounds, is not installed");
  // The charts' distinct texts up to 400 px (longer ones are captions of the same characters), one per 22 px band.
  std::vector<SvgText> samples;
  const ParsedSvg plan = parse_svg(plan_svg(synthetic_plan(12, false), "hcpsim plan: synthetic"));
  const ParsedSvg timeline = parse_svg(timeline_svg(synthetic_timeline(3), "synthetic", 3));
  for (const ParsedSvg* p : {&plan, &timeline})
    for (const SvgText& t : p->texts) {
      const bool seen = std::any_of(samples.begin(), samples.end(), [&](const SvgText& u) {
        return u.text == t.text && u.size == t.size && u.bold == t.bold;
      });
      if (!seen && t.box.x1 - t.box.x0 <= 400) samples.push_back(t);
    }
  REQUIRE(samples.size() >= 30);
  constexpr double kBand = 22;
  std::string svg = svg_open(420, kBand * static_cast<double>(samples.size()), "text extents");
  for (size_t i = 0; i < samples.size(); ++i) {
    SvgText& t = samples[i];
    t.x = 4;
    t.y = kBand * static_cast<double>(i) + 17;
    t.box = text_box(t.x, t.y, t.size, TextAnchor::start, t.text, t.bold);
    svg += svg_text(t.x, t.y, t.size, TextAnchor::start, t.text, t.bold ? "font-weight=\"bold\"" : "");
  }
  const std::string in = write_temp("hcpsim_chart_test_extents.svg", svg + "</svg>\n");
  const std::string png = in.substr(0, in.size() - 4) + ".png";
  REQUIRE(test::run_command(fmt::format("rsvg-convert -o '{}' '{}'", png, in)).exit_code == 0);
  const auto ink = test::run_command(fmt::format("python3 scripts/chart_png.py --ink '{}' {}", png, kBand));
  INFO(ink.output);
  REQUIRE(ink.exit_code == 0);
  std::istringstream lines(ink.output);
  size_t band = 0, bands = 0;
  double x0 = 0, x1 = 0, y0 = 0, y1 = 0;
  while (lines >> band >> x0 >> x1 >> y0 >> y1) {
    REQUIRE(band < samples.size());
    const SvgText& t = samples[band];
    INFO("'" << t.text << "' size " << t.size << (t.bold ? " bold" : "") << ": ink x [" << x0 << ", " << x1 + 1
             << "] y [" << y0 << ", " << y1 + 1 << "], estimate x [" << t.box.x0 << ", " << t.box.x1 << "] y ["
             << t.box.y0 << ", " << t.box.y1 << "]");
    CHECK(x0 >= t.box.x0 - 1);
    CHECK(x1 + 1 <= t.box.x1 + 0.5);
    CHECK(y0 >= t.box.y0 - 0.5);
    CHECK(y1 + 1 <= t.box.y1 + 0.5);
    ++bands;
  }
  CHECK(bands == samples.size());  // every sample drew ink in its own band
  std::filesystem::remove(in);
  std::filesystem::remove(png);
}

TEST_CASE("charts render to PNG with rsvg-convert", "[apps][chart]") {
  if (test::run_command("command -v rsvg-convert").exit_code != 0)
    TEST_SKIP_BECAUSE("rsvg-convert (Debian librsvg2-bin) is not installed: the PNG rendering is not checked");
  check_png_render("hcpsim_chart_test_plan3", plan_svg(synthetic_plan(3, false), "hcpsim plan: 3 options"));
  check_png_render("hcpsim_chart_test_plan40", plan_svg(synthetic_plan(40, false), "hcpsim plan: 40 options"));
  check_png_render("hcpsim_chart_test_none", plan_svg(synthetic_plan(12, true), "hcpsim plan: nothing fits"));
  check_png_render("hcpsim_chart_test_timeline", timeline_svg(synthetic_timeline(5), "synthetic", 4));
}

TEST_CASE("plan chart: memory values clear the capacity line; legend and caption match what is drawn",
          "[apps][chart]") {
  for (const bool none_fits : {false, true}) {
    sim::PlanResult r = synthetic_plan(12, none_fits);
    for (size_t i = 0; i < r.ranked.size(); ++i) {  // 64 GPUs per replica in every option, CP varying with TP
      sim::PlanOption& o = r.ranked[i];
      o.tp = int64_t{1} << (i % 3);
      o.pp = 2;
      o.cp = 32 / o.tp;
    }
    const std::string svg = plan_svg(r, "hcpsim plan: synthetic");
    const ParsedSvg p = parse_svg(svg);
    check_text_layout(p);
    // The capacity line (the same x in every row): no memory value may run across it.
    std::smatch m;
    REQUIRE(std::regex_search(svg, m, std::regex("<line x1=\"([0-9.]+)\"[^>]*stroke=\"#d62728\" stroke-width=\"1.5\"")));
    const double cx = std::stod(m[1].str());
    size_t values = 0;
    for (const SvgText& t : p.texts) {
      if (!std::regex_match(t.text, std::regex("[0-9.]+ GB(, does not fit)?"))) continue;  // a row's memory value
      ++values;
      INFO("'" << t.text << "' [" << t.box.x0 << ", " << t.box.x1 << "] vs capacity line " << cx);
      CHECK((t.box.x1 <= cx || t.box.x0 >= cx));
    }
    CHECK(values == 12);
    const auto has = [&](const std::string& s) {
      return std::any_of(p.texts.begin(), p.texts.end(), [&](const SvgText& t) { return t.text == s; });
    };
    CHECK(has("does not fit in GPU memory"));
    CHECK(has("fits") == !none_fits);  // no blue "fits" swatch when no bar is blue
    CHECK(svg.find("64 GPUs per model replica, CP = 64/(TP*PP)") != std::string::npos);
    CHECK(svg.find(none_fits ? "above the first row's (no option fits, so there is no winner)" : "above the winner's") !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace hcpsim::app
