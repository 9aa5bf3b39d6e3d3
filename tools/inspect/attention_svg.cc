#include "tools/inspect/attention_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tools/args.h"
#include "tools/bench/bench_svg.h"

namespace qkv::tools {

namespace {

// White (0) to dark blue (1).
std::string colour(double w) {
  const double t = std::clamp(w, 0.0, 1.0);
  const int r = static_cast<int>(std::lround(255 - t * (255 - 8)));
  const int g = static_cast<int>(std::lround(255 - t * (255 - 48)));
  const int b = static_cast<int>(std::lround(255 - t * (255 - 107)));
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}

std::string f(double v) { return fixed(v, 1); }

// Pieces in SentencePiece form read better with the "▁" shown as a middle dot.
std::string label(const std::string& piece) {
  std::string out;
  const std::string bar = "\xE2\x96\x81";
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, bar.size(), bar) == 0) {
      out += "\xC2\xB7";
      i += bar.size();
    } else {
      out += piece[i++];
    }
  }
  return out.size() > 14 ? out.substr(0, 13) + "~" : out;
}

}  // namespace

std::string render_attention_svg(const std::string& title, const std::vector<std::string>& pieces,
                                 const std::vector<HeatmapPanel>& panels, int64_t heads_per_row,
                                 int64_t group_size) {
  const auto n = static_cast<int64_t>(pieces.size());
  const double cell = std::clamp(320.0 / static_cast<double>(std::max<int64_t>(n, 1)), 3.0, 18.0);
  const bool labels = cell >= 7.0;
  const double font = std::min(11.0, cell * 0.75);
  const double margin = labels ? 8 + 0.62 * font * 14 : 8;  // room for a 14-character label
  const double grid = cell * static_cast<double>(n);
  const double panel_w = margin + grid + 24, panel_h = margin + grid + 40;
  const int64_t cols = std::max<int64_t>(1, heads_per_row);
  const int64_t rows = (static_cast<int64_t>(panels.size()) + cols - 1) / cols;
  const double legend_h = 60;
  const double W = 20 + panel_w * static_cast<double>(cols), H = 50 + panel_h * static_cast<double>(rows) + legend_h;

  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                  f(W) + "\" height=\"" + f(H) + "\" viewBox=\"0 0 " + f(W) + " " + f(H) +
                  "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"10\" y=\"24\" font-size=\"16\" font-weight=\"bold\">" + xml_escape(title) + "</text>\n";
  for (size_t p = 0; p < panels.size(); ++p) {
    const HeatmapPanel& hp = panels[p];
    const double x0 = 10 + panel_w * static_cast<double>(static_cast<int64_t>(p) % cols);
    const double y0 = 40 + panel_h * static_cast<double>(static_cast<int64_t>(p) / cols);
    const double gx = x0 + margin, gy = y0 + margin + 18;
    // A GQA group's frame starts at its first query head.
    if (group_size > 1 && hp.head % group_size == 0) {
      const int64_t span = std::min<int64_t>(group_size, cols - static_cast<int64_t>(p) % cols);
      s += "<rect class=\"group\" x=\"" + f(x0 - 4) + "\" y=\"" + f(y0 - 2) + "\" width=\"" +
           f(panel_w * static_cast<double>(span) - 4) + "\" height=\"" + f(panel_h - 6) +
           "\" fill=\"none\" stroke=\"#c47a00\" stroke-dasharray=\"4 3\"/>\n";
    }
    s += "<text x=\"" + f(gx) + "\" y=\"" + f(y0 + 12) + "\" font-size=\"12\">layer " + std::to_string(hp.layer) +
         " head " + std::to_string(hp.head) + " (KV head " + std::to_string(hp.kv_head) + ")</text>\n";
    s += "<g class=\"heatmap\" data-layer=\"" + std::to_string(hp.layer) + "\" data-head=\"" +
         std::to_string(hp.head) + "\">\n";
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j <= i && j < n; ++j) {
        const double w = hp.weights[static_cast<size_t>(i * n + j)];
        s += "<rect x=\"" + f(gx + cell * j) + "\" y=\"" + f(gy + cell * i) + "\" width=\"" + f(cell) +
             "\" height=\"" + f(cell) + "\" fill=\"" + colour(w) + "\"><title>" + xml_escape(label(pieces[i])) +
             " -> " + xml_escape(label(pieces[j])) + ": " + fixed(w, 4) + "</title></rect>\n";
      }
    }
    s += "<rect x=\"" + f(gx) + "\" y=\"" + f(gy) + "\" width=\"" + f(grid) + "\" height=\"" + f(grid) +
         "\" fill=\"none\" stroke=\"#888\"/>\n</g>\n";
    if (labels) {
      for (int64_t i = 0; i < n; ++i) {
        const std::string t = xml_escape(label(pieces[i]));
        s += "<text x=\"" + f(gx - 3) + "\" y=\"" + f(gy + cell * i + cell * 0.75) + "\" font-size=\"" + f(font) +
             "\" text-anchor=\"end\">" + t + "</text>\n";
        const double cx = gx + cell * i + cell * 0.7, cy = gy - 3;
        s += "<text x=\"" + f(cx) + "\" y=\"" + f(cy) + "\" font-size=\"" + f(font) + "\" transform=\"rotate(-60 " +
             f(cx) + " " + f(cy) + ")\">" + t + "</text>\n";
      }
    }
  }
  // Colour scale.
  const double ly = H - legend_h + 20, lw = 200;
  s += "<defs><linearGradient id=\"scale\"><stop offset=\"0\" stop-color=\"" + colour(0) +
       "\"/><stop offset=\"1\" stop-color=\"" + colour(1) + "\"/></linearGradient></defs>\n";
  s += "<rect x=\"10\" y=\"" + f(ly) + "\" width=\"" + f(lw) + "\" height=\"12\" fill=\"url(#scale)\" stroke=\"#888\"/>\n";
  s += "<text x=\"10\" y=\"" + f(ly + 26) + "\" font-size=\"11\">0</text><text x=\"" + f(10 + lw) + "\" y=\"" +
       f(ly + 26) + "\" font-size=\"11\" text-anchor=\"end\">1</text>\n";
  s += "<text x=\"" + f(20 + lw) + "\" y=\"" + f(ly + 11) +
       "\" font-size=\"11\">attention weight (rows: query tokens; columns: key tokens; causal)" +
       std::string(group_size > 1 ? "; dashed frames: query heads sharing one KV head" : "") + "</text>\n";
  s += "</svg>\n";
  return s;
}

}  // namespace qkv::tools
