// qkv pull OWNER/REPO[:QUANT] | OWNER/REPO/FILE.gguf: brings a GGUF model from
// a Hugging Face hub into the Hugging Face cache and prints its path.
#include <cstdio>
#include <string>
#include <vector>

#include "tools/models/commands.h"
#include "tools/models/hf_cache.h"
#include "tools/models/hub_pull.h"
#include "tools/models/hub_ref.h"

namespace qkv::tools::models {

namespace {

const char* const kUsage =
    "usage: qkv pull OWNER/REPO[:QUANT] | OWNER/REPO/FILE.gguf\n"
    "\n"
    "Downloads a GGUF model from the Hugging Face hub into the Hugging Face cache\n"
    "(shared with huggingface-cli, llama.cpp and Python tools) and prints its path.\n"
    "QUANT picks among the repository's GGUF files by the tag in their names,\n"
    "case-insensitively (default Q4_K_M); a split model's parts all come. A\n"
    "download resumes where an interrupted one stopped, and a file becomes\n"
    "visible only once its sha256 matches the hub's. The -hf flag of run, chat,\n"
    "serve, bench, embed and perplexity does the same before loading.\n"
    "\n"
    "environment:\n"
    "  HF_ENDPOINT     the hub (default https://huggingface.co)\n"
    "  HF_TOKEN        an access token, for gated and private repositories (default: the file\n"
    "                  huggingface-cli login writes, $HF_TOKEN_PATH or $HF_HOME/token)\n"
    "  HF_HUB_OFFLINE  1: only the cache is read\n"
    "  HF_HUB_CACHE, HF_HOME  the cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub\n"
    "  HTTPS_PROXY, NO_PROXY  proxies, read by libcurl\n"
    "  CURL_CA_BUNDLE, SSL_CERT_FILE, REQUESTS_CA_BUNDLE  a CA file to trust instead of the system's (the first set)\n";

}  // namespace

int cmd_pull(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "qkv pull: name one model\n\n%s", kUsage);
    return 2;
  }
  const HubRef ref = parse_hub_ref(argv[1]);
  const std::vector<std::string> paths = pull_model(ref, HubSettings::from_environment());
  for (const std::string& p : paths) std::printf("%s\n", p.c_str());
  return 0;
}

}  // namespace qkv::tools::models
