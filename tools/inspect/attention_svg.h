// Attention heatmaps as standalone SVG: one panel per (layer, head), rows =
// query tokens, columns = key tokens, each labelled with its token piece; a
// shared colour scale (white 0 to dark blue 1); the query heads of one GQA
// group are framed together and labelled with the KV head they read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qkv::tools {

struct HeatmapPanel {
  int64_t layer = 0, head = 0, kv_head = 0;
  std::vector<float> weights;  // [n][n]
};

std::string render_attention_svg(const std::string& title, const std::vector<std::string>& pieces,
                                 const std::vector<HeatmapPanel>& panels, int64_t heads_per_row,
                                 int64_t group_size);

}  // namespace qkv::tools
