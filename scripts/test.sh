#!/usr/bin/env bash
# Builds canopy three ways and runs everything CI checks:
#   build/        the normal build (RelWithDebInfo): the whole Catch2 suite through ctest
#   build-asan/   the same suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   build-fuzz/   clang + libFuzzer: each fuzz target runs for a fixed time under ASan
#   python/       the Python client's pytest suite, in build/python-venv, against build/daemon/canopyd
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

# Each stage line says how long the run has taken so far, so a slow stage shows in CI's log.
stage() { printf '\n==== %s (at %dm%02ds) ====\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }

# Fails unless every ctest entry of build dir $1 is exactly one Catch2 test case of its executable and every
# test case has one entry (a name that CMake split at ';', or one the executable no longer has, shows up as a
# difference), and unless each entry runs under the rules of tests/CMakeLists.txt that keep a test that ran
# nothing from passing: -w NoAssertions, "CANOPY-SKIP:" reported as skipped, and no name that starts with -.
check_ctest_entries() {
  local build=$1 listing entries cases commands bad skips
  listing=$(ctest --test-dir "$build" -N -V)
  entries=$(sed -n 's/^ *Test *#[0-9]*: //p' <<<"$listing" | LC_ALL=C sort)
  # --list-test-names-only exits with the number of names.
  cases=$(sed -n 's/^[0-9]*: Test command: \([^ ]*\) .*/\1/p' <<<"$listing" | LC_ALL=C sort -u |
    while read -r exe; do
      { "$exe" --list-test-names-only || true; } | sed "/^\$/d; s|^|$(basename "$exe"):|"
    done | LC_ALL=C sort)
  if [ "$entries" != "$cases" ]; then
    echo "check_ctest_entries: ctest entries that are no test case (<) and test cases without an entry (>):"
    diff <(printf '%s\n' "$entries") <(printf '%s\n' "$cases") | grep '^[<>]'
    return 1
  fi
  # Catch2 reads a name that starts with '-' as its own option (--help: it prints help and exits 0, running nothing).
  bad=$(grep '^[^:]*:-' <<<"$entries" || true)
  if [ -n "$bad" ]; then
    echo "check_ctest_entries: test names that start with '-' (Catch2 takes them for options):"
    echo "$bad"
    return 1
  fi
  commands=$(grep -c ': Test command: ' <<<"$listing" || true)
  bad=$(grep ': Test command: ' <<<"$listing" | grep -vF '"-w" "NoAssertions"' || true)
  if [ -n "$bad" ]; then
    echo "check_ctest_entries: entries run without -w NoAssertions:"
    echo "$bad"
    return 1
  fi
  skips=$(ctest --test-dir "$build" --show-only=json-v1 | grep -c '"CANOPY-SKIP:"' || true)
  if [ "$skips" != "$commands" ]; then
    echo "check_ctest_entries: $skips of $commands entries have SKIP_REGULAR_EXPRESSION \"CANOPY-SKIP:\""
    return 1
  fi
  echo "check_ctest_entries: $commands entries, one per test case, each under the no-assertion rules"
}

# ctest's "N% tests passed" counts skipped tests as passed; this line counts them apart (from ctest's JUnit
# file, $1).
count_results() {
  local passed skipped failed
  passed=$(grep -c 'status="run"' "$1" || true)
  skipped=$(grep -c 'status="notrun"' "$1" || true)
  failed=$(grep -c 'status="fail"' "$1" || true)
  echo "tests: $passed passed, $skipped skipped, $failed failed"
}

stage "normal build"
cmake -S . -B build -G Ninja "${launcher[@]}" -DCANOPY_BENCH=ON >/dev/null
ninja -C build -j "$jobs"
stage "tests"
check_ctest_entries build
ctest --test-dir build --output-on-failure -j "$jobs" --output-junit ctest-junit.xml
count_results build/ctest-junit.xml

# The sanitizer builds embed the GPU kernels the normal build compiled (CANOPY_KERNELS_FATBIN) rather than run
# nvcc on the same sources again; without the CUDA Toolkit there is none and nothing is embedded.
fatbin=(-DCANOPY_KERNELS_FATBIN=)
if [ -f build/worker/cuda/kernels.fatbin ]; then
  fatbin=(-DCANOPY_KERNELS_FATBIN="$root/build/worker/cuda/kernels.fatbin")
fi

stage "python client (pytest against build/daemon/canopyd)"
# A virtual environment of its own: Debian's Python refuses pip installs into the system (PEP 668).
python3 -m venv build/python-venv
build/python-venv/bin/pip install -q --disable-pip-version-check pytest numpy ./python
CANOPY_DAEMON="$root/build/daemon/canopyd" build/python-venv/bin/python -m pytest -q -p no:cacheprovider python/tests

if [ "${CANOPY_SKIP_ASAN:-0}" != 1 ]; then
  stage "ASan + UBSan build"
  cmake -S . -B build-asan -G Ninja "${launcher[@]}" "${fatbin[@]}" -DCANOPY_SANITIZE=ON -DCANOPY_BENCH=OFF \
    -DCMAKE_BUILD_TYPE=Debug >/dev/null
  ninja -C build-asan -j "$jobs"
  stage "tests under ASan + UBSan"
  check_ctest_entries build-asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" --output-junit ctest-junit.xml
  count_results build-asan/ctest-junit.xml
fi

if [ "${CANOPY_SKIP_FUZZ:-0}" != 1 ]; then
  stage "fuzz build (clang, libFuzzer, ASan + UBSan)"
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja "${launcher[@]}" "${fatbin[@]}" -DCANOPY_FUZZ=ON \
    -DCANOPY_SANITIZE=ON -DCANOPY_TESTS=OFF -DCANOPY_BENCH=OFF >/dev/null
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
