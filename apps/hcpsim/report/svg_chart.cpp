#include "svg_chart.hpp"

#include <fmt/format.h>

#include <cmath>

#include "hcpsim/io/xml.hpp"

namespace hcpsim::app {

const char* to_string(TextAnchor a) {
  switch (a) {
    case TextAnchor::start: return "start";
    case TextAnchor::middle: return "middle";
    case TextAnchor::end: return "end";
  }
  return "start";
}

namespace {

/// Upper bound of one ASCII character's advance in DejaVu Sans (em), from the font's advance widths (units of
/// 1/2048 em): lowercase at most 0.635 (b d g h n p q u) except m 0.974 and w 0.818; capitals at most 0.77 except
/// M 0.863 and W 0.989; digits 0.636; # + < = > ^ ~ 0.838, % 0.950, @ 1.0, & 0.780, space 0.318, other punctuation
/// at most 0.62. Anything else (non-ASCII) 1.0.
double advance_em(unsigned char c) {
  if (c == 'm' || c == 'M' || c == 'W' || c == '@' || c >= 0x80) return 1.0;
  if (c == '%') return 0.95;
  if (c == 'w' || c == '#' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~')
    return 0.87;
  if ((c >= 'A' && c <= 'Z') || c == '&') return 0.78;
  if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) return 0.64;
  if (c == ' ') return 0.32;
  return 0.62;
}

}  // namespace

double text_width(std::string_view text, double font_size, bool bold) {
  double em = 0;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u & 0xC0) != 0x80) em += advance_em(u);  // one advance per code point (not per UTF-8 continuation byte)
  }
  return em * font_size * (bold ? 1.12 : 1.0);  // DejaVu Sans Bold: at most 12% wider than the regular face
}

TextBox text_box(double x, double y, double font_size, TextAnchor anchor, std::string_view text, bool bold) {
  const double w = text_width(text, font_size, bold);
  const double x0 = anchor == TextAnchor::start ? x : anchor == TextAnchor::middle ? x - w / 2 : x - w;
  return TextBox{x0, y - 0.95 * font_size, x0 + w, y + 0.25 * font_size};
}

bool boxes_overlap(const TextBox& a, const TextBox& b) {
  return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
}

std::vector<std::string> wrap_text(const std::string& text, double font_size, double max_width) {
  std::vector<std::string> lines;
  std::string line;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(pos, end - pos);
    pos = end + 1;
    if (word.empty()) continue;
    const std::string joined = line.empty() ? word : line + " " + word;
    if (!line.empty() && text_width(joined, font_size) > max_width) {
      lines.push_back(line);
      line = word;
    } else {
      line = joined;
    }
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

double nice_step(double vmax, int max_intervals) {
  if (!(vmax > 0) || max_intervals < 1) return 1;
  const double raw = vmax / max_intervals;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * p >= raw * (1 - 1e-12)) return m * p;
  return 10 * p;
}

std::string axis_label(double value, double step) {
  int decimals = 0;
  while (decimals < 3 && std::fabs(step * std::pow(10.0, decimals) - std::round(step * std::pow(10.0, decimals))) > 1e-6)
    ++decimals;
  return fmt::format("{:.{}f}", value, decimals);
}

std::string svg_open(double width, double height, const std::string& title) {
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
      "width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" font-family=\"{2}\">\n<title>{3}</title>\n"
      "<rect x=\"0\" y=\"0\" width=\"{0:.0f}\" height=\"{1:.0f}\" fill=\"white\"/>\n",
      width, height, kChartFontFamily, xml_escape(title));
}

std::string svg_text(double x, double y, double font_size, TextAnchor anchor, const std::string& text,
                     const std::string& extra) {
  std::string attrs;
  if (anchor != TextAnchor::start) attrs += fmt::format(" text-anchor=\"{}\"", to_string(anchor));
  if (!extra.empty()) attrs += " " + extra;
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{:g}\"{}>{}</text>\n", x, y, font_size, attrs,
                     xml_escape(text));
}

std::string svg_rect(double x, double y, double width, double height, const std::string& extra) {
  return fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" {}/>\n", x, y, width, height,
                     extra);
}

std::string svg_line(double x1, double y1, double x2, double y2, const std::string& extra) {
  return fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" {}/>\n", x1, y1, x2, y2, extra);
}

std::string svg_legend(const std::vector<LegendItem>& items, double x0, double x_max, double& y) {
  constexpr double kFont = 11, kSwatch = 12, kGap = 18;
  std::string out;
  double x = x0;
  for (const LegendItem& item : items) {
    const double w = kSwatch + 5 + text_width(item.text, kFont);
    if (x > x0 && x + w > x_max) {
      x = x0;
      y += 18;
    }
    if (item.line)
      out += svg_line(x + kSwatch / 2, y - 11, x + kSwatch / 2, y + 2,
                      fmt::format("stroke=\"{}\" stroke-width=\"2\" stroke-dasharray=\"3,2\"", item.color));
    else
      out += svg_rect(x, y - 10, kSwatch, kSwatch,
                      fmt::format("fill=\"{}\"{} stroke=\"#555555\" stroke-width=\"0.5\"", item.color,
                                  item.opacity < 1 ? fmt::format(" fill-opacity=\"{}\"", item.opacity) : std::string()));
    out += svg_text(x + kSwatch + 5, y, kFont, TextAnchor::start, item.text);
    x += w + kGap;
  }
  y += 18;
  return out;
}

}  // namespace hcpsim::app
