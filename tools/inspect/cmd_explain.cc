// qkv explain: the attention lesson, computed step by step with qkv's own
// attention (the scalar fp64 reference and the production kernel side by side).
#include <cstdio>
#include <string>

#include "tools/args.h"
#include "tools/commands.h"
#include "tools/inspect/explain_lessons.h"
#include "tools/inspect/lesson_doc.h"

namespace qkv::tools {

namespace {

const char* kExplainUsage =
    "usage: qkv explain [--json] [--q ROWS --k ROWS --v ROWS [--heads H] [--kv-heads G] [--causal]]\n"
    "  without --q/--k/--v: the worked examples (one query over six keys, why sqrt(d),\n"
    "  dot product vs cosine vs distance, multi-head with MQA and GQA)\n"
    "  --q, --k, --v ROWS  your own numbers: rows separated by ';', values by ','\n"
    "                      (q rows hold heads*d values, k and v rows kv_heads*d)\n"
    "  --heads H           query heads (default 1)   --kv-heads G  KV heads (default 1; H % G == 0)\n"
    "  --causal            query i sees keys 0..i\n"
    "  --json              the same content as JSON\n";

// "1,2;3,4" -> {{1,2},{3,4}}
Matrix64 parse_rows(const char* flag, const std::string& s) {
  Matrix64 rows(1);
  std::string item;
  auto push_item = [&] {
    if (item.find_first_not_of(" \t") == std::string::npos) fail("flag ", flag, ": an empty value in '", s, "'");
    rows.back().push_back(parse_float(flag, item.c_str(), -1e30, 1e30));
    item.clear();
  };
  for (const char c : s) {
    if (c == ',') {
      push_item();
    } else if (c == ';') {
      push_item();
      rows.emplace_back();
    } else if (c != ' ') {
      item += c;
    }
  }
  push_item();
  return rows;
}

}  // namespace

int cmd_explain(int argc, char** argv) {
  bool json = false;
  CustomInput custom;
  bool have_q = false, have_k = false, have_v = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kExplainUsage, stdout);
      return 0;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--q") {
      custom.q = parse_rows("--q", flag_value(argc, argv, i));
      have_q = true;
    } else if (a == "--k") {
      custom.k = parse_rows("--k", flag_value(argc, argv, i));
      have_k = true;
    } else if (a == "--v") {
      custom.v = parse_rows("--v", flag_value(argc, argv, i));
      have_v = true;
    } else if (a == "--heads") {
      custom.heads = parse_int("--heads", flag_value(argc, argv, i), 1, 4096);
    } else if (a == "--kv-heads") {
      custom.kv_heads = parse_int("--kv-heads", flag_value(argc, argv, i), 1, 4096);
    } else if (a == "--causal") {
      custom.causal = true;
    } else {
      std::fprintf(stderr, "qkv explain: unknown flag '%s'\n\n%s", argv[i], kExplainUsage);
      return 2;
    }
  }
  if ((have_q || have_k || have_v) && !(have_q && have_k && have_v)) {
    std::fprintf(stderr, "qkv explain: --q, --k and --v go together\n\n%s", kExplainUsage);
    return 2;
  }
  Doc doc;
  if (have_q) {
    lesson_custom(doc, custom);
  } else {
    const SixKeys six = tutorial_six_keys();
    lesson_single_query(doc, six, true);
    lesson_scaling(doc);
    lesson_similarity(doc, six);
    lesson_multihead(doc);
  }
  if (json) {
    render_json(doc, stdout);
  } else {
    render_text(doc, stdout);
  }
  return 0;
}

}  // namespace qkv::tools
