// ctest-labels: asan
// What qkv pull makes of OWNER/REPO[:QUANT] and OWNER/REPO/FILE.gguf, and which
// of a repository's GGUF files a quant tag picks (tools/models/hub_ref.h): the
// tag matched case-insensitively as a whole label in the file name, Q4_K_M by
// default, split models as one choice with every part. tests/hub_ref.cmake
// compiles tools/models/hub_ref.cc into this test.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kernels/error.h"
#include "tools/models/hub_ref.h"

using qkv::tools::models::choose_gguf;
using qkv::tools::models::gguf_choices;
using qkv::tools::models::GgufChoice;
using qkv::tools::models::HubRef;
using qkv::tools::models::parse_hub_ref;
using qkv::tools::models::quant_label;

namespace {

std::string error_of(const std::vector<std::string>& files, const std::string& ref) {
  try {
    choose_gguf(gguf_choices(files), parse_hub_ref(ref));
  } catch (const qkv::Error& e) {
    return e.what();
  }
  return "";
}

std::string pick(const std::vector<std::string>& files, const std::string& ref) {
  return choose_gguf(gguf_choices(files), parse_hub_ref(ref)).files.at(0);
}

const std::vector<std::string> kRepo = {
    "README.md", "Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Llama-3.2-1B-Instruct-Q4_K_S.gguf",
    "Llama-3.2-1B-Instruct-IQ4_XS.gguf", "Llama-3.2-1B-Instruct-Q8_0.gguf", "mmproj-Llama-3.2-1B-F16.gguf",
    "Llama-3.2-1B-Instruct-f16-00001-of-00002.gguf", "Llama-3.2-1B-Instruct-f16-00002-of-00002.gguf"};

}  // namespace

TEST_CASE("parse_hub_ref: the three forms") {
  const HubRef a = parse_hub_ref("bartowski/Llama-3.2-1B-Instruct-GGUF");
  CHECK(a.repo == "bartowski/Llama-3.2-1B-Instruct-GGUF");
  CHECK(a.quant.empty());
  CHECK(a.file.empty());
  const HubRef b = parse_hub_ref("bartowski/Llama-3.2-1B-Instruct-GGUF:q4_k_m");
  CHECK(b.repo == "bartowski/Llama-3.2-1B-Instruct-GGUF");
  CHECK(b.quant == "q4_k_m");
  CHECK(parse_hub_ref("hf:acme/repo:Q8_0").repo == "acme/repo");
  CHECK(parse_hub_ref("hf://acme/repo:Q8_0").quant == "Q8_0");
  const HubRef c = parse_hub_ref("acme/repo/sub/dir/model-Q8_0.gguf");
  CHECK(c.repo == "acme/repo");
  CHECK(c.file == "sub/dir/model-Q8_0.gguf");
}

TEST_CASE("parse_hub_ref: what it refuses, with the reason") {
  CHECK_THROWS_WITH_AS(parse_hub_ref("no-owner"), doctest::Contains("OWNER/REPO"), qkv::Error);
  CHECK_THROWS_WITH_AS(parse_hub_ref("acme/repo:"), doctest::Contains("empty"), qkv::Error);
  CHECK_THROWS_WITH_AS(parse_hub_ref("acme/repo/readme.md"), doctest::Contains(".gguf"), qkv::Error);
  CHECK_THROWS_WITH_AS(parse_hub_ref("acme/repo/../../x.gguf"), doctest::Contains("'..'"), qkv::Error);
  CHECK_THROWS_WITH_AS(parse_hub_ref("../repo"), doctest::Contains("OWNER/REPO"), qkv::Error);
  CHECK_THROWS_WITH_AS(parse_hub_ref("ac me/repo"), doctest::Contains("not ' '"), qkv::Error);
  CHECK_THROWS_WITH_AS(parse_hub_ref("acme/repo:Q4$"), doctest::Contains("quant tag"), qkv::Error);
}

TEST_CASE("quant_label: the last word before .gguf and a split suffix") {
  CHECK(quant_label("Llama-3.2-1B-Instruct-Q4_K_M.gguf") == "Q4_K_M");
  CHECK(quant_label("mixtral-8x7b-v0.1.Q5_K_S.gguf") == "Q5_K_S");
  CHECK(quant_label("dir/model-f16-00001-of-00003.gguf") == "f16");
  CHECK(quant_label("model.gguf") == "model");
}

TEST_CASE("gguf_choices: split parts grouped in order, projectors and other files left out") {
  const std::vector<GgufChoice> c = gguf_choices(kRepo);
  REQUIRE(c.size() == 5);
  bool saw_split = false;
  for (const GgufChoice& g : c) {
    CHECK(g.files[0].find("mmproj") == std::string::npos);
    if (g.files.size() == 2) {
      saw_split = true;
      CHECK(g.quant == "f16");
      CHECK(g.files[0] == "Llama-3.2-1B-Instruct-f16-00001-of-00002.gguf");
      CHECK(g.files[1] == "Llama-3.2-1B-Instruct-f16-00002-of-00002.gguf");
    }
  }
  CHECK(saw_split);
  CHECK_THROWS_WITH_AS(gguf_choices({"m-Q8_0-00001-of-00003.gguf", "m-Q8_0-00003-of-00003.gguf"}),
                       doctest::Contains("lacks part 2 of 3"), qkv::Error);
}

TEST_CASE("choose_gguf: the tag as a whole label, case-insensitive; Q4_K_M by default") {
  CHECK(pick(kRepo, "a/b") == "Llama-3.2-1B-Instruct-Q4_K_M.gguf");
  CHECK(pick(kRepo, "a/b:q4_k_s") == "Llama-3.2-1B-Instruct-Q4_K_S.gguf");
  CHECK(pick(kRepo, "a/b:IQ4_XS") == "Llama-3.2-1B-Instruct-IQ4_XS.gguf");
  CHECK(pick(kRepo, "a/b:F16") == "Llama-3.2-1B-Instruct-f16-00001-of-00002.gguf");
  CHECK(choose_gguf(gguf_choices(kRepo), parse_hub_ref("a/b:f16")).files.size() == 2);
  CHECK(pick(kRepo, "a/b/Llama-3.2-1B-Instruct-f16-00002-of-00002.gguf") == "Llama-3.2-1B-Instruct-f16-00001-of-00002.gguf");
  // Q4_K is a prefix of two labels, a whole one of none; XS is inside IQ4_XS only.
  CHECK(error_of(kRepo, "a/b:Q4_K").find("has no GGUF file tagged Q4_K; available: ") != std::string::npos);
  CHECK(error_of(kRepo, "a/b:Q4_XS").find("IQ4_XS (Llama-3.2-1B-Instruct-IQ4_XS.gguf)") != std::string::npos);
  CHECK(error_of(kRepo, "a/b/missing.gguf").find("has no file missing.gguf") != std::string::npos);
}

TEST_CASE("choose_gguf: one model without the default tag; several matches named") {
  CHECK(pick({"tiny-Q8_0.gguf"}, "a/b") == "tiny-Q8_0.gguf");
  CHECK(error_of({"tiny-Q8_0.gguf", "tiny-Q4_0.gguf"}, "a/b").find("available: Q4_0 (tiny-Q4_0.gguf), Q8_0") !=
        std::string::npos);
  CHECK(error_of({"base-Q8_0.gguf", "instruct-Q8_0.gguf"}, "a/b:Q8_0").find("matches several files") != std::string::npos);
  CHECK(error_of({"README.md"}, "a/b").find("holds no GGUF file") != std::string::npos);
}
