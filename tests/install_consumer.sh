#!/usr/bin/env bash
# A separate program built against an installed qkv, the way users link it:
#   1. `cmake --install BUILD --prefix TMP`, and the layout it must produce;
#   2. libqkv.so exports exactly the QKV_API functions of qkv.h (nm -D), and
#      qkv.h compiles as strict C99 and as C++;
#   3. examples/ configured with find_package(qkv CONFIG) (qkv::qkv, and
#      qkv::qkv_static) and built with -j2;
#   4. examples/generate.c built with a plain compiler line from pkg-config,
#      once against libqkv.so (--libs) and once against libqkv.a (--static);
#   5. every binary run greedily on stories260K; each must print exactly what
#      `qkv run --temp 0 --steps N -p PROMPT` prints. Without ../shared the
#      runs are skipped (with a message) but steps 1-4 still happen.
# usage: install_consumer.sh BUILD_DIR SOURCE_DIR SHARED_DIR [C_COMPILER] [CMAKE]
set -uo pipefail
build=$1
src=$2
shared=$3
cc=${4:-cc}
cmake=${5:-cmake}
steps=96
prompt="Once upon a time"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/qkv-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok [${SECONDS}s]: $*"; }

# ---- 1. install ----
if ! "$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"
  echo "FAIL: cmake --install $build failed (are qkv, qkv_shared and qkv_static built?)"
  exit 1
fi
pc=$(find "$prefix" -name qkv.pc -path '*/pkgconfig/*' | head -1)
[ -n "$pc" ] || { echo "FAIL: no qkv.pc installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
echo "installed into $prefix (libdir ${libdir#"$prefix"/}):"
(cd "$prefix" && find . -mindepth 1 | sort | sed 's/^\.\//  /')
for f in include/qkv.h bin/qkv; do
  [ -f "$prefix/$f" ] || fail "missing $f"
done
for f in libqkv.a libqkv.so pkgconfig/qkv.pc cmake/qkv/qkv-config.cmake cmake/qkv/qkv-config-version.cmake \
         cmake/qkv/qkv-shared-targets.cmake cmake/qkv/qkv-static-targets.cmake; do
  [ -e "$libdir/$f" ] || fail "missing ${libdir#"$prefix"/}/$f"
done
soname=$(readelf -d "$libdir/libqkv.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ -n "$soname" ] && [ -e "$libdir/$soname" ] || fail "libqkv.so has no SONAME or $soname is not installed"

# ---- 2. exported symbols and the header ----
nm -D --defined-only "$libdir/libqkv.so" | awk '{print $3}' | sed 's/@.*//' | sort -u >"$tmp/exported"
sed -n 's/^QKV_API .*\b\(qkv_[a-z0-9_]*\)(.*/\1/p' "$prefix/include/qkv.h" | sort -u >"$tmp/declared"
if grep -v '^qkv_' "$tmp/exported" >"$tmp/foreign"; then
  fail "libqkv.so exports $(wc -l <"$tmp/foreign") symbols outside the C API, e.g.:"
  head -10 "$tmp/foreign"
fi
if ! diff -u "$tmp/declared" "$tmp/exported" >"$tmp/export.diff"; then
  fail "libqkv.so's exports differ from the QKV_API functions of qkv.h (- declared only, + exported only):"
  cat "$tmp/export.diff"
else
  ok "libqkv.so exports exactly the $(wc -l <"$tmp/declared") QKV_API functions of qkv.h, nothing else"
fi
# The archive defines them too (as global text symbols).
nm --defined-only "$libdir/libqkv.a" 2>/dev/null | awk '$2 == "T" && $3 ~ /^qkv_/ {print $3}' | sort -u >"$tmp/archived"
cmp -s "$tmp/declared" "$tmp/archived" || fail "libqkv.a does not define exactly the declared qkv_* functions"
printf '#include <qkv.h>\nint main(void) { return qkv_version() == 0; }\n' >"$tmp/header.c"
"$cc" -std=c99 -pedantic-errors -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" "$tmp/header.c" ||
  fail "qkv.h does not compile as strict C99"
c++ -std=c++11 -pedantic-errors -Wall -Wextra -Werror -fsyntax-only -x c++ -I"$prefix/include" "$tmp/header.c" ||
  fail "qkv.h does not compile as C++11"

# ---- 3. find_package ----
cmake_bin=$tmp/cmake-build
if "$cmake" -S "$src/examples" -B "$cmake_bin" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
     -DCMAKE_C_COMPILER="$cc" "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror" "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror" \
     >"$tmp/configure.log" 2>&1 &&
   "$cmake" --build "$cmake_bin" -j2 >"$tmp/build.log" 2>&1; then
  ok "examples/ built with find_package(qkv CONFIG)"
else
  cat "$tmp/configure.log" "$tmp/build.log" 2>/dev/null | tail -40
  fail "examples/ did not configure or build against the installed package"
fi
[ -x "$cmake_bin/generate_static" ] || fail "find_package gave no qkv::qkv_static (generate_static not built)"
if [ -x "$cmake_bin/generate" ]; then
  readelf -d "$cmake_bin/generate" | grep -q "NEEDED.*libqkv.so" || fail "generate (find_package) does not use libqkv.so"
fi
if [ -x "$cmake_bin/generate_static" ]; then
  readelf -d "$cmake_bin/generate_static" | grep -q "NEEDED.*libqkv" && fail "generate_static still needs libqkv.so"
fi

# ---- 4. pkg-config and a plain compiler line ----
export PKG_CONFIG_PATH=$libdir/pkgconfig
pkg_bin=$tmp/pkg-build
mkdir -p "$pkg_bin"
if ! command -v pkg-config >/dev/null; then
  fail "pkg-config is not installed (Debian package pkgconf)"
else
  [ "$(pkg-config --modversion qkv)" = "$(sed -n 's/^Version: //p' "$pc")" ] || fail "pkg-config --modversion qkv"
  # shellcheck disable=SC2046
  if "$cc" -std=c99 -Wall -Wextra -Werror -o "$pkg_bin/generate" "$src/examples/generate.c" \
       $(pkg-config --cflags --libs qkv) -Wl,-rpath,"$libdir"; then
    ok "generate.c built with \$(pkg-config --cflags --libs qkv)"
  else
    fail "generate.c did not build with pkg-config --libs qkv: $(pkg-config --cflags --libs qkv)"
  fi
  # Static: --static adds Libs.private; -l:libqkv.a picks the archive over the .so.
  static_libs=$(pkg-config --static --libs qkv | sed 's/-lqkv\b/-l:libqkv.a/')
  # shellcheck disable=SC2086
  if "$cc" -std=c99 -Wall -Wextra -Werror -o "$pkg_bin/generate_static" "$src/examples/generate.c" \
       $(pkg-config --cflags qkv) $static_libs; then
    ok "generate.c built against libqkv.a with \$(pkg-config --static --libs qkv)"
    readelf -d "$pkg_bin/generate_static" | grep -q "NEEDED.*libqkv" && fail "static pkg-config build needs libqkv.so"
  else
    fail "generate.c did not build with pkg-config --static: $static_libs"
  fi
fi

# ---- 5. run against qkv run ----
model=$shared/models/stories260K.bin
tok=$shared/models/tok512.bin
gguf=$shared/models/stories260K.gguf
binaries=("$cmake_bin/generate" "$cmake_bin/generate_cpp" "$cmake_bin/generate_static" "$pkg_bin/generate"
          "$pkg_bin/generate_static")
if [ ! -f "$model" ] || [ ! -f "$tok" ]; then
  echo "SKIPPED: runs against qkv run: $shared/models is absent (the shared models live beside the project root)"
else
  expected=$tmp/expected.txt
  if ! "$prefix/bin/qkv" run -m "$model" -z "$tok" --temp 0 --steps $steps -p "$prompt" -q >"$expected" 2>"$tmp/qkv.err"; then
    cat "$tmp/qkv.err"
    fail "qkv run failed"
  fi
  [ "$(wc -c <"$expected")" -gt 100 ] || fail "qkv run printed almost nothing: $(cat "$expected")"
  for b in "${binaries[@]}"; do
    name=${b#"$tmp"/}
    [ -x "$b" ] || { fail "$name was not built"; continue; }
    if "$b" "$model" "$tok" "$prompt" $steps >"$tmp/got" 2>"$tmp/err"; then
      if cmp -s "$expected" "$tmp/got"; then ok "$name prints what qkv run prints ($(wc -c <"$expected") bytes)"
      else fail "$name differs from qkv run:"; diff "$expected" "$tmp/got" | head -10; fi
    else
      fail "$name exited non-zero: $(cat "$tmp/err")"
    fi
  done
  # A GGUF with its own vocabulary (no tokenizer file).
  if [ -f "$gguf" ] && [ -x "$cmake_bin/generate" ]; then
    "$prefix/bin/qkv" run -m "$gguf" --temp 0 --steps $steps -p "$prompt" -q >"$tmp/expected_gguf" 2>/dev/null
    "$cmake_bin/generate" "$gguf" - "$prompt" $steps >"$tmp/got_gguf" 2>/dev/null
    cmp -s "$tmp/expected_gguf" "$tmp/got_gguf" && ok "generate on the GGUF prints what qkv run prints" ||
      fail "generate on the GGUF differs from qkv run"
  fi
fi
# Errors reach the C program as a status and a message; nothing aborts.
if [ -x "$pkg_bin/generate" ]; then
  "$pkg_bin/generate" "$tmp/no-such-model.gguf" - "x" 8 >/dev/null 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 1 ] && grep -q "load failed (i/o error): .*no-such-model.gguf" "$tmp/err"; then
    ok "a missing model is an i/o error with a message, exit 1"
  else
    fail "missing model: exit $rc, stderr: $(cat "$tmp/err")"
  fi
fi

if [ $fails -ne 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all install checks passed"
