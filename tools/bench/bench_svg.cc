#include "tools/bench/bench_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "kernels/error.h"

namespace qkv::tools {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

namespace {

// Geometry (SVG user units = pixels).
constexpr double kPanelW = 470, kPanelH = 340;
constexpr double kPlotLeft = 72, kPlotRight = 18, kPlotTop = 34, kPlotBottom = 52;
constexpr double kTitleH = 40, kLegendRowH = 20, kPad = 12;

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Tick values are printed compactly: 4096, 1.5, 12k, 2.5M.
std::string tick_text(double v) {
  const double a = std::fabs(v);
  if (a >= 1e6) return fmt("%gM", v / 1e6);
  if (a >= 1e4) return fmt("%gk", v / 1e3);
  return fmt("%g", v);
}

// A "nice" step (1, 2 or 5 times a power of ten) giving about `target` intervals.
double nice_step(double span, int target) {
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double n = raw / mag;
  return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
}

struct Axis {
  double lo = 0, hi = 1;  // in axis space (log2 of the value on a log axis)
  bool log2 = false;
  std::vector<double> ticks;  // in axis space
  double to_axis(double v) const { return log2 ? std::log2(v) : v; }
  std::string label_at(double t) const { return tick_text(log2 ? std::exp2(t) : t); }
};

// A linear axis from min(0, lo) to a nice value at or above hi.
Axis linear_axis(double lo, double hi) {
  Axis a;
  a.lo = std::min(0.0, lo);
  if (!(hi > a.lo)) hi = a.lo + 1;
  const double step = nice_step(hi - a.lo, 5);
  a.lo = std::floor(a.lo / step) * step;
  a.hi = std::ceil(hi / step - 1e-9) * step;
  for (double t = a.lo; t <= a.hi + step * 1e-6; t += step) a.ticks.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  return a;
}

// Powers of two from below the smallest value to above the largest.
Axis log2_axis(double lo, double hi) {
  Axis a;
  a.log2 = true;
  a.lo = std::floor(std::log2(lo));
  a.hi = std::ceil(std::log2(hi));
  if (a.hi <= a.lo) a.hi = a.lo + 1;
  const double step = std::max(1.0, std::ceil((a.hi - a.lo) / 8));
  for (double t = a.lo; t <= a.hi + 1e-9; t += step) a.ticks.push_back(t);
  return a;
}

void draw_panel(std::string& svg, const ChartPanel& p, double ox, double oy,
                const std::map<std::string, int>& colour_of) {
  const double pw = kPanelW - kPlotLeft - kPlotRight, ph = kPanelH - kPlotTop - kPlotBottom;
  const double px = ox + kPlotLeft, py = oy + kPlotTop;  // plot area's top-left corner
  svg += "<g class=\"panel\">\n";
  svg += "<text x=\"" + fmt("%.1f", px + pw / 2) + "\" y=\"" + fmt("%.1f", oy + 20) +
         "\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">" + xml_escape(p.title) + "</text>\n";

  bool any = false;
  double xmin = INFINITY, xmax = -INFINITY, ymax = 0;
  for (const ChartSeries& s : p.series) {
    for (const ChartPoint& q : s.points) {
      QKV_CHECK(std::isfinite(q.x) && std::isfinite(q.y), "plot: a non-finite value in '", s.label, "'");
      QKV_CHECK(!p.log2_x || q.x > 0, "plot: x must be positive on the log axis of '", p.title, "'");
      any = true;
      xmin = std::min(xmin, q.x);
      xmax = std::max(xmax, q.x);
      ymax = std::max({ymax, q.y, q.y_max});
    }
  }
  if (!any) {
    xmin = p.log2_x ? 1 : 0;
    xmax = p.log2_x ? 2 : 1;
    ymax = 1;
  }
  const Axis xa = p.log2_x ? log2_axis(xmin, xmax) : linear_axis(xmin, xmax);
  const Axis ya = linear_axis(0, ymax > 0 ? ymax * 1.05 : 1);
  auto X = [&](double v) { return px + (xa.to_axis(v) - xa.lo) / (xa.hi - xa.lo) * pw; };
  auto Y = [&](double v) { return py + ph - (v - ya.lo) / (ya.hi - ya.lo) * ph; };

  // Grid, ticks and tick labels.
  svg += "<g class=\"grid\" stroke=\"#e0e0e0\" stroke-width=\"1\">\n";
  for (const double t : ya.ticks) {
    const double y = py + ph - (t - ya.lo) / (ya.hi - ya.lo) * ph;
    svg += "<line x1=\"" + fmt("%.1f", px) + "\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" + fmt("%.1f", px + pw) +
           "\" y2=\"" + fmt("%.1f", y) + "\"/>\n";
  }
  svg += "</g>\n<g class=\"ticks\" stroke=\"#000\" stroke-width=\"1\" font-size=\"11\">\n";
  for (const double t : ya.ticks) {
    const double y = py + ph - (t - ya.lo) / (ya.hi - ya.lo) * ph;
    svg += "<line x1=\"" + fmt("%.1f", px - 5) + "\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" + fmt("%.1f", px) +
           "\" y2=\"" + fmt("%.1f", y) + "\"/>\n";
    svg += "<text x=\"" + fmt("%.1f", px - 8) + "\" y=\"" + fmt("%.1f", y + 4) +
           "\" text-anchor=\"end\" stroke=\"none\">" + xml_escape(ya.label_at(t)) + "</text>\n";
  }
  for (const double t : xa.ticks) {
    const double x = px + (t - xa.lo) / (xa.hi - xa.lo) * pw;
    svg += "<line x1=\"" + fmt("%.1f", x) + "\" y1=\"" + fmt("%.1f", py + ph) + "\" x2=\"" + fmt("%.1f", x) +
           "\" y2=\"" + fmt("%.1f", py + ph + 5) + "\"/>\n";
    svg += "<text x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", py + ph + 18) +
           "\" text-anchor=\"middle\" stroke=\"none\">" + xml_escape(xa.label_at(t)) + "</text>\n";
  }
  svg += "</g>\n";
  // Axes.
  svg += "<g class=\"axes\" stroke=\"#000\" stroke-width=\"1.5\">\n<line x1=\"" + fmt("%.1f", px) + "\" y1=\"" +
         fmt("%.1f", py + ph) + "\" x2=\"" + fmt("%.1f", px + pw) + "\" y2=\"" + fmt("%.1f", py + ph) +
         "\"/>\n<line x1=\"" + fmt("%.1f", px) + "\" y1=\"" + fmt("%.1f", py) + "\" x2=\"" + fmt("%.1f", px) +
         "\" y2=\"" + fmt("%.1f", py + ph) + "\"/>\n</g>\n";
  svg += "<text class=\"xlabel\" x=\"" + fmt("%.1f", px + pw / 2) + "\" y=\"" + fmt("%.1f", py + ph + 40) +
         "\" text-anchor=\"middle\" font-size=\"12\">" + xml_escape(p.x_label) + "</text>\n";
  const double ly = py + ph / 2, lx = ox + 16;
  svg += "<text class=\"ylabel\" x=\"" + fmt("%.1f", lx) + "\" y=\"" + fmt("%.1f", ly) +
         "\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 " + fmt("%.1f", lx) + " " +
         fmt("%.1f", ly) + ")\">" + xml_escape(p.y_label) + "</text>\n";

  if (!any) {
    svg += "<text x=\"" + fmt("%.1f", px + pw / 2) + "\" y=\"" + fmt("%.1f", py + ph / 2) +
           "\" text-anchor=\"middle\" font-size=\"12\" fill=\"#888\">no data</text>\n";
  }
  for (const ChartSeries& s : p.series) {
    if (s.points.empty()) continue;
    const char* colour = kPalette[colour_of.at(s.label) % (sizeof kPalette / sizeof kPalette[0])];
    std::vector<ChartPoint> pts = s.points;
    std::sort(pts.begin(), pts.end(), [](const ChartPoint& a, const ChartPoint& b) { return a.x < b.x; });
    svg += "<g class=\"series\" stroke=\"" + std::string(colour) + "\" fill=\"" + colour + "\">\n<title>" +
           xml_escape(s.label) + "</title>\n";
    std::string line;
    for (const ChartPoint& q : pts) line += fmt("%.1f", X(q.x)) + "," + fmt("%.1f", Y(q.y)) + " ";
    line.pop_back();
    svg += "<polyline fill=\"none\" stroke-width=\"2\" points=\"" + line + "\"/>\n";
    for (const ChartPoint& q : pts) {
      const double x = X(q.x);
      if (q.y_min >= 0 && q.y_max >= 0) {  // min..max whisker with caps
        svg += "<path stroke-width=\"1\" fill=\"none\" d=\"M" + fmt("%.1f", x) + " " + fmt("%.1f", Y(q.y_min)) +
               "V" + fmt("%.1f", Y(q.y_max)) + "M" + fmt("%.1f", x - 3) + " " + fmt("%.1f", Y(q.y_min)) + "h6M" +
               fmt("%.1f", x - 3) + " " + fmt("%.1f", Y(q.y_max)) + "h6\"/>\n";
      }
      svg += "<circle cx=\"" + fmt("%.1f", x) + "\" cy=\"" + fmt("%.1f", Y(q.y)) + "\" r=\"3\"/>\n";
    }
    svg += "</g>\n";
  }
  svg += "</g>\n";
}

}  // namespace

std::string render_svg_chart(const std::string& title, const std::vector<ChartPanel>& panels) {
  QKV_CHECK(!panels.empty(), "plot: nothing to draw");
  // One colour per legend label, in order of first appearance.
  std::map<std::string, int> colour_of;
  std::vector<std::string> legend;
  for (const ChartPanel& p : panels) {
    for (const ChartSeries& s : p.series) {
      if (colour_of.emplace(s.label, static_cast<int>(legend.size())).second) legend.push_back(s.label);
    }
  }
  const double width = kPad * 2 + kPanelW * static_cast<double>(panels.size());
  const double legend_top = kTitleH + kPanelH + 8;
  const double height = legend_top + kLegendRowH * static_cast<double>(legend.size()) + kPad;

  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + fmt("%.0f", width) + "\" height=\"" +
         fmt("%.0f", height) + "\" viewBox=\"0 0 " + fmt("%.0f", width) + " " + fmt("%.0f", height) +
         "\" font-family=\"Helvetica, Arial, sans-serif\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  svg += "<text class=\"title\" x=\"" + fmt("%.1f", width / 2) +
         "\" y=\"26\" text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\">" + xml_escape(title) + "</text>\n";
  for (size_t i = 0; i < panels.size(); ++i) {
    draw_panel(svg, panels[i], kPad + kPanelW * static_cast<double>(i), kTitleH, colour_of);
  }
  svg += "<g class=\"legend\" font-size=\"12\">\n";
  for (size_t i = 0; i < legend.size(); ++i) {
    const double y = legend_top + kLegendRowH * static_cast<double>(i) + 10;
    const char* colour = kPalette[i % (sizeof kPalette / sizeof kPalette[0])];
    svg += "<line x1=\"" + fmt("%.1f", kPad + kPlotLeft) + "\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" +
           fmt("%.1f", kPad + kPlotLeft + 28) + "\" y2=\"" + fmt("%.1f", y) + "\" stroke=\"" + colour +
           "\" stroke-width=\"2\"/>\n";
    svg += "<circle cx=\"" + fmt("%.1f", kPad + kPlotLeft + 14) + "\" cy=\"" + fmt("%.1f", y) + "\" r=\"3\" fill=\"" +
           colour + "\"/>\n";
    svg += "<text x=\"" + fmt("%.1f", kPad + kPlotLeft + 36) + "\" y=\"" + fmt("%.1f", y + 4) + "\">" +
           xml_escape(legend[i]) + "</text>\n";
  }
  svg += "</g>\n</svg>\n";
  return svg;
}

}  // namespace qkv::tools
