#include "tools/serve/spec_options.h"

#include "kernels/error.h"
#include "tools/args.h"

namespace qkv::serve {

const char* const kSpeculativeUsage =
    "Speculative decoding (each slot drafts on its own; one verify pass checks every slot's draft):\n"
    "  -md, --model-draft FILE  a draft model of the same vocabulary drafts greedily\n"
    "  --spec-type ngram     prompt lookup drafts instead: the last N tokens matched earlier in the text\n"
    "  --spec-ngram-size N   the longest n-gram prompt lookup matches, 1 .. 64 (default 3; then N-1 .. 1)\n"
    "  --draft-max, --draft, --draft-n N  tokens drafted per verify pass, 1 .. 256 (default 16)\n"
    "  --draft-min N         fewer drafted tokens run a plain step (default 0)\n"
    "  --draft-p-min P       the draft model stops before a token below probability P (default 0.75)\n"
    "  -cd, --ctx-size-draft N  positions per slot of the draft model's cache (default: -c, at most\n"
    "                        the draft model's)\n"
    "  A request turns it off with \"speculative\": false (or \"speculative.n_max\": 0) and sets\n"
    "  \"speculative.n_max\", \"speculative.n_min\", \"speculative.p_min\" for itself; a request with a\n"
    "  grammar or JSON schema decodes token by token.\n";

bool parse_speculative_flag(int argc, char** argv, int& i, SpeculativeServe& o) {
  using tools::flag_value;
  using tools::parse_float;
  using tools::parse_int;
  const std::string a = argv[i];
  if (a == "-md" || a == "--model-draft") {
    o.draft_path = flag_value(argc, argv, i);
    if (o.draft_path.empty()) fail("flag ", a, " needs a file");
  } else if (a == "--spec-type") {
    const std::string type = flag_value(argc, argv, i);
    if (type != "ngram") fail("--spec-type '", type, "' is not known (ngram is; a draft model is -md FILE)");
    o.ngram = true;
  } else if (a == "--spec-ngram-size") {
    o.ngram_size = parse_int(a.c_str(), flag_value(argc, argv, i), 1, 64);
  } else if (a == "--draft-max" || a == "--draft" || a == "--draft-n") {
    o.draft_max = parse_int(a.c_str(), flag_value(argc, argv, i), 1, 256);
  } else if (a == "--draft-min") {
    o.draft_min = parse_int(a.c_str(), flag_value(argc, argv, i), 0, 256);
  } else if (a == "--draft-p-min") {
    o.p_min = parse_float(a.c_str(), flag_value(argc, argv, i), 0.0, 1.0);
  } else if (a == "-cd" || a == "--ctx-size-draft") {
    o.draft_context = parse_int(a.c_str(), flag_value(argc, argv, i), 2, INT64_C(1) << 24);
  } else {
    return false;
  }
  return true;
}

void check_speculative_flags(const SpeculativeServe& o) {
  if (!o.draft_path.empty() && o.ngram) fail("-md FILE and --spec-type ngram exclude each other (give one drafter)");
  if (o.draft_min > o.draft_max) fail("--draft-min ", o.draft_min, " exceeds --draft-max ", o.draft_max);
}

}  // namespace qkv::serve
