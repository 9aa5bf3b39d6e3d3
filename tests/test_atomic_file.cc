// ctest-labels: asan
// runtime/atomic_file.h: an output appears whole or not at all.
#include <doctest/doctest.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <vector>

#include <fstream>
#include <sstream>
#include <string>

#include "kernels/error.h"
#include "runtime/atomic_file.h"
#include "runtime/gguf.h"

namespace {

std::string out_dir() {
  const std::string d = std::string(QKV_BINARY_DIR) + "/test_atomic_file." + std::to_string(::getpid());
  ::mkdir(d.c_str(), 0755);
  return d;
}

int entries(const std::string& dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("an abandoned file leaves nothing; a committed one replaces the target whole") {
  const std::string dir = out_dir();
  const std::string path = dir + "/out.bin";
  {
    qkv::AtomicFile f(path);
    f.write("partial");
    CHECK(entries(dir) == 1);  // only the temporary file
    CHECK(access(path.c_str(), F_OK) != 0);
  }
  CHECK(entries(dir) == 0);
  {
    std::ofstream old(path);
    old << "old contents";
  }
  {
    qkv::AtomicFile f(path);
    f.write("new ");
    f.write(std::string("bytes\0x", 7));
    CHECK(f.size() == 11);
    CHECK(slurp(path) == "old contents");  // untouched until commit
    f.commit();
    CHECK_THROWS_WITH(f.write("more"), doctest::Contains("after it was committed"));
    CHECK_THROWS_WITH(f.commit(), doctest::Contains("twice"));
  }
  CHECK(slurp(path) == std::string("new bytes\0x", 11));
  CHECK(entries(dir) == 1);
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("an unwritable place is an I/O error naming the file") {
  try {
    qkv::AtomicFile f("/nonexistent-dir-qkv/out.gguf");
    FAIL("opened a file in a missing directory");
  } catch (const qkv::Error& e) {
    CHECK(e.kind() == qkv::ErrorKind::kIO);
    CHECK(std::string(e.what()).find("/nonexistent-dir-qkv/out.gguf.tmp.") != std::string::npos);
  }
  CHECK_THROWS_WITH(qkv::AtomicFile(""), doctest::Contains("empty path"));
}

// A file-size limit (RLIMIT_FSIZE) fails writes past it with EFBIG, as a full
// disk fails them with ENOSPC; tests/cli_disk_full.sh fills a real tmpfs.
TEST_CASE("a GGUF written past the file-size limit is an I/O error and leaves no file") {
  const std::string dir = out_dir();
  const std::string path = dir + "/big.gguf";
  std::vector<uint8_t> data(256 * 1024, 7);
  qkv::GGUFWriter w;
  w.set("general.architecture", qkv::GGUFValue::string("llama"));
  w.add_tensor("t", 0 /* F32 */, {data.size() / 4}, data.data(), data.size());
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
  rlimit small = old;
  small.rlim_cur = 64 * 1024;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  bool threw = false;
  std::string what;
  try {
    w.write(path);
  } catch (const qkv::Error& e) {
    threw = true;
    what = e.what();
    CHECK(e.kind() == qkv::ErrorKind::kIO);
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  CHECK(threw);
  CHECK(what.find(path + ".tmp.") != std::string::npos);
  CHECK(what.find("File too large") != std::string::npos);
  CHECK(entries(dir) == 0);
  // Within the limit the same writer gives the whole file.
  w.write(path);
  CHECK(slurp(path).size() == w.serialize().size());
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("write_file_atomically: the bytes whole, or an error and nothing") {
  const std::string dir = out_dir();
  const std::string path = dir + "/page.svg";
  qkv::write_file_atomically(path, std::string("<svg>\0</svg>", 13));
  CHECK(slurp(path) == std::string("<svg>\0</svg>", 13));
  CHECK_THROWS_WITH(qkv::write_file_atomically(dir + "/missing/page.svg", "x"), doctest::Contains("missing/page.svg"));
  CHECK(entries(dir) == 1);
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}
