// qkv plot: draws one or more `qkv bench --json` results as one SVG: decode
// tokens/s against context depth and aggregate tokens/s against batch size
// (plus prefill tokens/s against prompt length when any file has prefill rows),
// one line per file (its configuration label), with min..max whiskers.
#include <cstdio>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "runtime/atomic_file.h"
#include "tools/args.h"
#include "tools/bench/bench_json.h"
#include "tools/bench/bench_svg.h"
#include "tools/commands.h"

namespace qkv::tools {

namespace {

const char* kPlotUsage =
    "usage: qkv plot BENCH.json [MORE.json ...] -o FILE.svg [--title TEXT]\n"
    "  BENCH.json       output of qkv bench --json (one line per file in each panel)\n"
    "  -o, --output     the SVG file to write\n"
    "  --title TEXT     chart title (default: qkv bench throughput)\n";

ChartPoint point_of(const Json& row, const char* x_key, const std::string& path) {
  ChartPoint p;
  p.x = row.at(x_key).as_number();
  const Json& tps = row.at("tokens_per_s");
  p.y = tps.at("median").as_number();
  p.y_min = tps.at("min").as_number();
  p.y_max = tps.at("max").as_number();
  QKV_CHECK(p.y >= 0 && p.y_min >= 0 && p.y_max >= 0, path, ": negative tokens/s");
  return p;
}

}  // namespace

int cmd_plot(int argc, char** argv) {
  std::vector<std::string> inputs;
  std::string output, title = "qkv bench throughput";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kPlotUsage, stdout);
      return 0;
    } else if (a == "-o" || a == "--output") {
      output = flag_value(argc, argv, i);
    } else if (a == "--title") {
      title = flag_value(argc, argv, i);
    } else if (!a.empty() && a[0] != '-') {
      inputs.push_back(a);
    } else {
      std::fprintf(stderr, "qkv plot: unknown flag '%s'\n\n%s", argv[i], kPlotUsage);
      return 2;
    }
  }
  if (inputs.empty() || output.empty()) {
    std::fprintf(stderr, "qkv plot: at least one BENCH.json and -o FILE.svg are required\n\n%s", kPlotUsage);
    return 2;
  }

  ChartPanel decode{"Decode, one sequence", "context depth (tokens)", "tokens/s", false, {}};
  ChartPanel batch{"Batched decode", "sequences stepping together", "aggregate tokens/s", true, {}};
  ChartPanel prefill{"Prefill", "prompt length (tokens)", "tokens/s", false, {}};
  std::set<std::string> labels;
  for (const std::string& path : inputs) {
    const Json doc = Json::parse(read_file(path), path);
    const Json* tool = doc.find("tool");
    QKV_CHECK(tool && tool->is_string() && tool->as_string() == "qkv bench", path,
              ": not the output of qkv bench --json (no \"tool\": \"qkv bench\")");
    std::string label = doc.at("label").as_string();
    // Two runs of the same configuration still need two legend entries.
    if (!labels.insert(label).second) {
      label += " (" + path + ")";
      labels.insert(label);
    }
    ChartSeries d{label, {}}, b{label, {}}, p{label, {}};
    for (const Json& row : doc.at("rows").items()) {
      const std::string& kind = row.at("kind").as_string();
      if (kind == "decode") d.points.push_back(point_of(row, "depth", path));
      else if (kind == "batch") b.points.push_back(point_of(row, "batch", path));
      else if (kind == "prefill") p.points.push_back(point_of(row, "tokens", path));
    }
    decode.series.push_back(std::move(d));
    batch.series.push_back(std::move(b));
    prefill.series.push_back(std::move(p));
  }
  std::vector<ChartPanel> panels{decode, batch};
  for (const ChartSeries& s : prefill.series) {
    if (!s.points.empty()) {
      panels.push_back(prefill);
      break;
    }
  }
  const std::string svg = render_svg_chart(title, panels);
  write_file_atomically(output, svg);
  return 0;
}

}  // namespace qkv::tools
