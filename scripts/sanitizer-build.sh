# Sourced by scripts/test-sanitizers.sh and scripts/fuzz.sh: how a sanitizer build is configured.
#
# address,undefined (build-asan/) is Clang's, with the libFuzzer targets in it (EMBER_FUZZ): the
# suite under ASan + UBSan and the fuzzers share one build of the library, which is what CI
# spends most of its time on. Clang, libFuzzer and libomp are installed through apt when
# missing (Debian ships libFuzzer in libclang-rt-dev, or in clang itself up to 14). thread
# (build-tsan/) is GCC's.
#
# -O1 with line tables only (-g1): what the sanitizers' own documentation recommends, and half
# the compile time of -O2 -g; reports still name the file and line. The library's layers are
# unity-built (batches of 8 sources per compilation: about half the compile time again): these
# builds start from scratch every time, where a unity build's slower rebuilds cost nothing.

# Whether clang++ links a libFuzzer target with ASan, UBSan and OpenMP (the library's threads;
# Clang's runtime is libomp, not GCC's libgomp), from a probe compiled in $1.
clang_links() {
  mkdir -p "$1"
  printf '%s\n' '#include <omp.h>' \
    'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return omp_get_max_threads() > 0 ? 0 : 1; }' \
    > "$1/probe.cpp"
  command -v clang++ >/dev/null &&
    clang++ -fsanitize=fuzzer,address,undefined -fopenmp "$1/probe.cpp" -o "$1/probe" 2>/dev/null
}

ensure_clang() {  # scratch-dir
  clang_links "$1" && return 0
  local sudo=""
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  echo "sanitizer build: installing clang, libclang-rt-dev and libomp-dev" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    clang libclang-rt-dev libomp-dev >&2 ||
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang libomp-dev >&2
  clang_links "$1" || { echo "sanitizer build: clang cannot link -fsanitize=fuzzer with -fopenmp" >&2; return 1; }
}

configure_sanitizer_build() {  # source-dir build-dir sanitizers
  local source=$1 dir=$2 sanitizers=$3 compilers=()
  if [[ $sanitizers == address,undefined ]]; then
    ensure_clang "$dir"
    compilers=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DEMBER_FUZZ=ON)
  fi
  cmake -S "$source" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_SANITIZE="$sanitizers" \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
        -DEMBER_UNITY_BUILD=ON "${compilers[@]}" \
        -DEMBER_TESTS=ON -DEMBER_EXAMPLES=ON -DEMBER_BENCHMARKS=OFF -DEMBER_CUDA=OFF >/dev/null
}
