# Finds qkv's dependencies, all from Debian 12 packages, and names the package
# to install when one is missing. Nothing upstream is copied here.

function(qkv_require found_var what package)
  if(NOT ${found_var})
    message(FATAL_ERROR "qkv needs ${what}: install the Debian package '${package}' "
                        "(scripts/setup.sh installs everything), then configure again.")
  endif()
endfunction()

find_package(hwy CONFIG QUIET)
qkv_require(hwy_FOUND "Highway (hwy::hwy)" libhwy-dev)
# One corrected Highway header, found before the package's (hwy_shim/hwy/ops/set_macros-inl.h says why).
set(QKV_HWY_SHIM_DIR ${CMAKE_CURRENT_LIST_DIR}/hwy_shim)

find_package(OpenMP QUIET COMPONENTS CXX)
qkv_require(OpenMP_CXX_FOUND "OpenMP (OpenMP::OpenMP_CXX)" "g++ (libgomp)")

# Debian's oneDNN config requires OpenCL (its GPU runtime) and stops configuring
# with CMake's own message when it is missing; check first to name the package.
# QKV_ONEDNN_TARGET: what qkv links for oneDNN (nothing with QKV_ONEDNN off).
set(QKV_ONEDNN_TARGET "")
if(QKV_ONEDNN)
  find_package(OpenCL QUIET)
  qkv_require(OpenCL_FOUND "the OpenCL headers and loader that oneDNN's CMake config requires"
              ocl-icd-opencl-dev)
  find_package(dnnl CONFIG QUIET)
  qkv_require(dnnl_FOUND "oneDNN (DNNL::dnnl)" libdnnl-dev)
  set(QKV_ONEDNN_TARGET DNNL::dnnl)
endif()

# Tokenizers: PCRE2 runs the BPE pre-tokenizer patterns, utf8proc normalizes text.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PCRE2 QUIET IMPORTED_TARGET libpcre2-8)
  pkg_check_modules(UTF8PROC QUIET IMPORTED_TARGET libutf8proc)
endif()
qkv_require(PCRE2_FOUND "PCRE2 (libpcre2-8, through pkg-config)" "libpcre2-dev and pkg-config")
qkv_require(UTF8PROC_FOUND "utf8proc (libutf8proc, through pkg-config)" "libutf8proc-dev and pkg-config")

if(QKV_BUILD_TESTS)
  find_package(doctest CONFIG QUIET)
  qkv_require(doctest_FOUND "doctest (doctest::doctest)" doctest-dev)
  # The tokenizer oracles are JSON lines.
  find_package(nlohmann_json CONFIG QUIET)
  qkv_require(nlohmann_json_FOUND "nlohmann-json (nlohmann_json::nlohmann_json)" nlohmann-json3-dev)
endif()

if(QKV_BUILD_BENCH)
  find_package(benchmark CONFIG QUIET)
  qkv_require(benchmark_FOUND "Google Benchmark (benchmark::benchmark)" libbenchmark-dev)
endif()

# qkv serve: HTTP from cpp-httplib (Debian ships it as a library with a
# pkg-config file, whose flags must match how it was built), JSON from nlohmann-json.
find_package(PkgConfig QUIET)
qkv_require(PKG_CONFIG_FOUND "pkg-config" pkg-config)
pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
qkv_require(HTTPLIB_FOUND "cpp-httplib (pkg-config cpp-httplib)" libcpp-httplib-dev)
find_package(nlohmann_json 3 CONFIG QUIET)
qkv_require(nlohmann_json_FOUND "nlohmann-json (nlohmann_json::nlohmann_json)" nlohmann-json3-dev)

find_package(Threads REQUIRED)

find_package(nlohmann_json 3 CONFIG QUIET)
qkv_require(nlohmann_json_FOUND "nlohmann-json (nlohmann_json::nlohmann_json)" nlohmann-json3-dev)
