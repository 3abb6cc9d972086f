#pragma once
/// Pieces shared by the SVG charts (plan chart, simulate timeline): one estimate of a text's box, used both to lay
/// charts out and by the tests that check rendered charts for overlapping text, an axis step, word wrapping and
/// the SVG elements the charts emit. Deterministic text (fixed number formats).

#include <string>
#include <string_view>
#include <vector>

namespace hcpsim::app {

/// The font every chart sets. Debian's librsvg (rsvg-convert) and Chromium resolve it to DejaVu Sans.
inline constexpr const char* kChartFontFamily = "DejaVu Sans, sans-serif";

/// Horizontal alignment of a text at its x (SVG text-anchor).
enum class TextAnchor { start, middle, end };

/// "start" | "middle" | "end".
const char* to_string(TextAnchor a);

/// An axis-aligned box in SVG user units (px): x0 ≤ x1, y0 ≤ y1 (y grows downwards).
struct TextBox {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

/// Estimated advance width (px) of `text` (UTF-8; one advance per code point) at `font_size` px in
/// kChartFontFamily: per character an upper bound of DejaVu Sans's advance (lowercase and digits 0.64 em, capitals
/// 0.78 em, the widest letters and symbols up to 1 em, space 0.32 em, non-ASCII 1 em), × 1.12 bold. Conservative:
/// never narrower than what rsvg-convert draws (tests/apps/chart_svg_test.cpp checks it on the charts' texts).
double text_width(std::string_view text, double font_size, bool bold = false);

/// The box of a text drawn at (x, y) (y the baseline): text_width wide, aligned by `anchor`, from 0.95 em above
/// the baseline (DejaVu Sans ascender 0.93 em) to 0.25 em below it (descender 0.24 em).
TextBox text_box(double x, double y, double font_size, TextAnchor anchor, std::string_view text, bool bold = false);

/// True when the interiors of `a` and `b` intersect (boxes that only touch do not overlap).
bool boxes_overlap(const TextBox& a, const TextBox& b);

/// `text` split at spaces into lines whose text_width at `font_size` is at most `max_width` (a single word wider
/// than that gets its own line). Empty text gives no line.
std::vector<std::string> wrap_text(const std::string& text, double font_size, double max_width);

/// A "nice" axis step (1, 2, 2.5 or 5 × 10^k) that divides [0, vmax] into at most `max_intervals` intervals
/// (and at least half as many). vmax ≤ 0 gives 1.
double nice_step(double vmax, int max_intervals);

/// Formats an axis value with the fewest decimals (at most 3) that show `step`'s resolution, e.g. 2.5 -> "2.5".
std::string axis_label(double value, double step);

/// The opening of a self-contained SVG 1.1 document of width × height px with a <title>, a white background and
/// kChartFontFamily set on the root. Close it with "</svg>\n".
std::string svg_open(double width, double height, const std::string& title);

/// One <text> element at (x, y), XML-escaped, with `extra` appended to its attributes (e.g. "fill=\"#c00000\"").
std::string svg_text(double x, double y, double font_size, TextAnchor anchor, const std::string& text,
                     const std::string& extra = "");

/// One <rect> element; `extra` is appended to its attributes (fill, stroke, class ...).
std::string svg_rect(double x, double y, double width, double height, const std::string& extra);

/// One <line> element; `extra` is appended to its attributes (stroke, dash ...).
std::string svg_line(double x1, double y1, double x2, double y2, const std::string& extra);

/// One legend entry: a 12 px swatch and its text.
struct LegendItem {
  std::string color;      ///< swatch fill ("url(#id)" for a pattern), or the line colour
  std::string text;
  bool line = false;      ///< true: the swatch is a dashed vertical line of `color` (a threshold), not a box
  double opacity = 1;     ///< the box's fill-opacity: the same as the chart's bars of this item
};

/// Legend items laid out left to right from x0 at font 11, wrapped before x_max. `y` is the first row's baseline
/// and is advanced past the last row (by 18 px per row). Returns the SVG elements.
std::string svg_legend(const std::vector<LegendItem>& items, double x0, double x_max, double& y);

}  // namespace hcpsim::app
