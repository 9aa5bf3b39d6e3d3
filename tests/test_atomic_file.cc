// ctest-labels: asan
// runtime/atomic_file.h: an output appears whole or not at all.
#include <doctest/doctest.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "kernels/error.h"
#include "runtime/atomic_file.h"

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
