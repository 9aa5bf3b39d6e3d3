// Line charts as standalone SVG: side-by-side panels sharing one legend, each
// with axes, tick marks and values, axis labels and a title; every series is a
// polyline with point markers and optional min..max whiskers. No dependencies;
// the output is plain SVG 1.1 that browsers and image viewers open.
#pragma once

#include <string>
#include <vector>

namespace qkv::tools {

struct ChartPoint {
  double x = 0, y = 0;
  double y_min = -1, y_max = -1;  // whisker range; negative: none
};

struct ChartSeries {
  std::string label;  // legend entry (series with the same label share a colour across panels)
  std::vector<ChartPoint> points;
};

struct ChartPanel {
  std::string title, x_label, y_label;
  bool log2_x = false;  // x on a base-2 log scale (batch sizes); all x must be > 0
  std::vector<ChartSeries> series;
};

// The whole SVG document. Panels without any point are drawn with a
// "no data" note so the layout does not depend on the data. Throws
// qkv::Error for non-finite values or a non-positive x on a log axis.
std::string render_svg_chart(const std::string& title, const std::vector<ChartPanel>& panels);

// "a < b & c" -> "a &lt; b &amp; c" (text and attribute values).
std::string xml_escape(const std::string& s);

}  // namespace qkv::tools
