// Compares qkv's ids with Hugging Face's (the JSON lines tokenizer_hf.mjs
// writes) for one vocabulary, and checks decode(encode(s)) == s (== NFC(s)
// with --nfc, for vocabularies that normalize; not with --ids-only).
// Usage: tokenizer_hf_check VOCAB REFERENCE.jsonl [--nfc | --ids-only]
// VOCAB: a GGUF vocabulary or a tokenizer.json (with its tokenizer_config.json).
// Exit 0 when every line matches; prints the counts and the first mismatches.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "runtime/tokenizer.h"
#include "runtime/tokenizer/normalize.h"

namespace {

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const bool nfc = argc == 4 && std::string(argv[3]) == "--nfc";
  const bool ids_only = argc == 4 && std::string(argv[3]) == "--ids-only";
  if (argc != 3 && !nfc && !ids_only) {
    std::fprintf(stderr, "usage: tokenizer_hf_check VOCAB REFERENCE.jsonl [--nfc | --ids-only]\n");
    return 2;
  }
  try {
    const qkv::Tokenizer tok = qkv::Tokenizer::load(argv[1]);
    // Hugging Face's Llama 3 tokenizer.json adds no BOS; llama.cpp (and qkv's
    // GGUF loader) add it for llama-bpe vocabularies, so that column is
    // compared only when the two conventions agree.
    const bool compare_added = qkv::Tokenizer::is_hf_json(argv[1]) || tok.bpe_pre() != "llama-bpe";
    std::ifstream in(argv[2]);
    std::string row;
    int lines = 0, ids_ok = 0, added_ok = 0, round_ok = 0, shown = 0;
    while (std::getline(in, row)) {
      if (row.empty()) continue;
      const nlohmann::json j = nlohmann::json::parse(row);
      const std::string text = j.at("text").get<std::string>();
      const auto want = j.at("ids").get<std::vector<int32_t>>();
      const auto want_added = j.at("ids_added").get<std::vector<int32_t>>();
      ++lines;
      // Hugging Face always matches added tokens in the text: parse_special.
      const std::vector<int32_t> got = tok.encode(text, false, false, true);
      const std::vector<int32_t> got_added = tok.encode(text, tok.add_bos(), tok.add_eos(), true);
      const std::string back = tok.decode(got, true);
      const bool a = got == want, b = !compare_added || got_added == want_added;
      const bool c = ids_only || back == (nfc ? qkv::nfc(text) : text);
      ids_ok += a;
      added_ok += b;
      round_ok += c;
      if ((!a || !b || !c) && shown++ < 10) {
        std::printf("MISMATCH text %s\n  hf   %s\n  qkv  %s\n  hf+  %s\n  qkv+ %s\n  decode %s\n",
                    nlohmann::json(text).dump().c_str(), join(want).c_str(), join(got).c_str(),
                    join(want_added).c_str(), join(got_added).c_str(), nlohmann::json(back).dump().c_str());
      }
    }
    std::printf("%s: %d strings: ids %d/%d identical, with special tokens added %d/%d%s, round trip %d/%d%s\n",
                argv[1], lines, ids_ok, lines, added_ok, lines, compare_added ? "" : " (not compared: BOS convention)",
                round_ok, lines, ids_only ? " (not compared)" : "");
    return lines > 0 && ids_ok == lines && added_ok == lines && round_ok == lines ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_hf_check: %s\n", e.what());
    return 1;
  }
}
