// The lessons of qkv explain: the worked examples of scaled dot-product
// attention (a single query over six keys, why scores are scaled by sqrt(d),
// dot product against cosine and distance, multi-head with MQA/GQA), every
// number computed here in fp64 and by qkv's attention implementations (the
// scalar fp64 reference and the production kernel, through the C API).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/inspect/lesson_doc.h"

namespace qkv::tools {

using Matrix64 = std::vector<std::vector<double>>;  // rows

// The tutorial's example: query "sat", six keys and values.
struct SixKeys {
  std::vector<double> q;
  Matrix64 k, v;
  std::vector<std::string> names;
};
SixKeys tutorial_six_keys();

// Steps 3-6 for one query over keys k with values v (one head). tutorial_rounding:
// also replay the hand computation's early rounding and show how far it moved.
void lesson_single_query(Doc& doc, const SixKeys& in, bool tutorial_rounding);
void lesson_scaling(Doc& doc);
void lesson_similarity(Doc& doc, const SixKeys& in);
void lesson_multihead(Doc& doc);

// Own numbers: q rows of heads*d values, k/v rows of kv_heads*d values.
struct CustomInput {
  Matrix64 q, k, v;
  int64_t heads = 1, kv_heads = 1;
  bool causal = false;
};
void lesson_custom(Doc& doc, const CustomInput& in);

}  // namespace qkv::tools
