#!/usr/bin/env bash
# Builds canopy three ways and runs everything CI checks:
#   build/        the normal build (RelWithDebInfo): the whole Catch2 suite through ctest
#   build-asan/   the same suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   build-fuzz/   clang + libFuzzer: each fuzz target runs for a fixed time under ASan
# Installs missing dependencies first. Exits non-zero on the first failure.
# Environment: CANOPY_FUZZ_SECONDS (default 60) is the time given to fuzz_decode_task_args; the other
# targets get a third of it. CANOPY_SKIP_ASAN=1 / CANOPY_SKIP_FUZZ=1 skip those stages for quick local runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

scripts/install-deps.sh

jobs=${CANOPY_JOBS:-$(nproc)}
fuzz_seconds=${CANOPY_FUZZ_SECONDS:-60}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths under the checkout hash relative to it, so clones in other folders share the cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

stage() { printf '\n==== %s ====\n' "$*"; }

stage "normal build"
cmake -S . -B build -G Ninja "${launcher[@]}" -DCANOPY_BENCH=ON >/dev/null
ninja -C build -j "$jobs"
stage "tests"
ctest --test-dir build --output-on-failure -j "$jobs"

if [ "${CANOPY_SKIP_ASAN:-0}" != 1 ]; then
  stage "ASan + UBSan build"
  cmake -S . -B build-asan -G Ninja "${launcher[@]}" -DCANOPY_SANITIZE=ON -DCANOPY_BENCH=OFF \
    -DCMAKE_BUILD_TYPE=Debug >/dev/null
  ninja -C build-asan -j "$jobs"
  stage "tests under ASan + UBSan"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs"
fi

if [ "${CANOPY_SKIP_FUZZ:-0}" != 1 ]; then
  stage "fuzz build (clang, libFuzzer, ASan + UBSan)"
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja "${launcher[@]}" -DCANOPY_FUZZ=ON -DCANOPY_SANITIZE=ON \
    -DCANOPY_TESTS=OFF -DCANOPY_BENCH=OFF >/dev/null
  ninja -C build-fuzz -j "$jobs" canopy_fuzzers
  for target in build-fuzz/tests/fuzz/fuzz_*; do
    [ -x "$target" ] || continue
    name=$(basename "$target")
    seconds=$fuzz_seconds
    [ "$name" = fuzz_decode_task_args ] || seconds=$(( fuzz_seconds / 3 > 5 ? fuzz_seconds / 3 : 5 ))
    stage "fuzz $name for ${seconds}s"
    corpus=$(mktemp -d)
    cp -r "$root/tests/fuzz/corpus/$name/." "$corpus/" 2>/dev/null || true
    "$target" -max_total_time="$seconds" -print_final_stats=1 "$corpus" 2>&1 | tail -n 12
    rm -rf "$corpus"
  done
fi

stage "all stages passed"
