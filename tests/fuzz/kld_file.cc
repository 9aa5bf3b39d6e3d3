// fuzz_kld_file: llama.cpp's KL-divergence base file reader (runtime/kld_file.h):
// the header's sizes against the file, the tokens and every row.
#include "runtime/kld_file.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qkv;
  const std::string& path = fuzz::write_input(data, size);
  fuzz::expect_clean([&] {
    const KldBaseFile f = KldBaseFile::open(path);
    (void)f.tokens();
    const int64_t per_chunk = kld_scored_per_chunk(f.n_ctx());
    double sum = 0;
    for (int64_t c = 0; c < f.n_chunk(); ++c) {
      for (int64_t j = 0; j < per_chunk; ++j) {
        const KldRow r = f.row(c, j);
        sum += r.log_prob(0) + r.log_prob(f.n_vocab() - 1);
      }
    }
    if (sum == 1.5) std::fputc('\0', stderr);  // keeps the reads observable
  });
  return 0;
}
