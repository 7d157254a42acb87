#!/usr/bin/env bash
# Builds canopy two ways and runs everything CI checks:
#   build/        the normal build (RelWithDebInfo): the whole Catch2 suite through ctest
#   build-asan/   clang: the same suite under AddressSanitizer + UndefinedBehaviorSanitizer, and the libFuzzer
#                 targets, each run for a fixed time, $(nproc) at a time
#   build-tsan/   clang: the suites of threaded code under ThreadSanitizer (tests/tsan.supp: what it cannot see into)
#   python/       the Python client's pytest suite, in build/python-venv, against build/daemon/canopyd
# Installs missing dependencies first. Exits non-zero on the first failure.
# Environment: CANOPY_FUZZ_SECONDS (default 40) is the time given to fuzz_decode_task_args; the other
# targets get a third of it. CANOPY_JOBS (default nproc) is how many compile and fuzz at once, CANOPY_TEST_JOBS
# (default twice that) how many tests run at once. CANOPY_SKIP_ASAN=1 / CANOPY_SKIP_FUZZ=1 skip those stages for
# quick local runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

scripts/install-deps.sh

jobs=${CANOPY_JOBS:-$(nproc)}
# Tests run two per CPU: most of them wait on processes, sockets and timers rather than compute (the normal suite
# keeps about one of 2 CPUs busy at one per CPU), and on 2 CPUs two per CPU took the normal suite from 75 s to 42 s
# and the one under the sanitizers from 167 s to 127 s.
test_jobs=${CANOPY_TEST_JOBS:-$((jobs * 2))}
fuzz_seconds=${CANOPY_FUZZ_SECONDS:-40}
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
ctest --test-dir build --output-on-failure -j "$test_jobs" --output-junit ctest-junit.xml
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

# One sanitizer build serves the ASan + UBSan suite and the fuzz targets. It is clang's: libFuzzer needs it, it
# compiles this code at -O0 in half gcc's time, and the normal build has already compiled everything with gcc.
build_san="build-asan"
if [ "${CANOPY_SKIP_ASAN:-0}" != 1 ] || [ "${CANOPY_SKIP_FUZZ:-0}" != 1 ]; then
  stage "sanitizer build (clang, ASan + UBSan, with the libFuzzer targets)"
  # CMake cannot change a build's compiler in place: a build-asan/ that another compiler configured is
  # configured afresh.
  if [ -f "$build_san/CMakeCache.txt" ] &&
    ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' "$build_san/CMakeCache.txt"; then
    rm -rf "$build_san/CMakeCache.txt" "$build_san/CMakeFiles"
  fi
  cmake -S . -B "$build_san" -G Ninja "${launcher[@]}" "${fatbin[@]}" -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DCANOPY_SANITIZE=ON -DCANOPY_FUZZ=ON -DCANOPY_BENCH=OFF \
    -DCMAKE_BUILD_TYPE=Debug >/dev/null
  if [ "${CANOPY_SKIP_ASAN:-0}" != 1 ]; then
    ninja -C "$build_san" -j "$jobs"
  else
    ninja -C "$build_san" -j "$jobs" canopy_fuzzers
  fi
fi

if [ "${CANOPY_SKIP_ASAN:-0}" != 1 ]; then
  stage "tests under ASan + UBSan"
  check_ctest_entries "$build_san"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$build_san" --output-on-failure -j "$test_jobs" --output-junit ctest-junit.xml
  count_results "$build_san/ctest-junit.xml"
fi

if [ "${CANOPY_SKIP_FUZZ:-0}" != 1 ]; then
  stage "fuzz targets, $jobs at a time"
  fuzz_logs=$(mktemp -d)
  # Runs fuzz target $1 on a copy of its seed corpus; its report goes to $fuzz_logs/NAME.log and its status to
  # NAME.rc (0, or what libFuzzer exited with on a finding).
  fuzz_target() {
    local target=$1 name seconds corpus rc=0
    name=$(basename "$target")
    seconds=$fuzz_seconds
    [ "$name" = fuzz_decode_task_args ] || seconds=$(( fuzz_seconds / 3 > 5 ? fuzz_seconds / 3 : 5 ))
    corpus=$(mktemp -d)
    cp -r "$root/tests/fuzz/corpus/$name/." "$corpus/" 2>/dev/null || true
    "$target" -max_total_time="$seconds" -print_final_stats=1 "$corpus" >"$fuzz_logs/$name.log" 2>&1 || rc=$?
    rm -rf "$corpus"
    echo "$name for ${seconds}s" >"$fuzz_logs/$name.what"
    echo "$rc" >"$fuzz_logs/$name.rc"
  }
  # $jobs targets fuzz at once, the longest (fuzz_decode_task_args) first; each of the others starts when one
  # ends.
  targets=()
  for target in "$build_san"/tests/fuzz/fuzz_*; do
    [ -x "$target" ] || continue
    if [ "$(basename "$target")" = fuzz_decode_task_args ]; then targets=("$target" "${targets[@]}"); else targets+=("$target"); fi
  done
  for target in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    fuzz_target "$target" &
  done
  wait
  fuzz_failed=0
  for target in "${targets[@]}"; do
    name=$(basename "$target")
    printf -- '---- fuzz %s: exit %s\n' "$(cat "$fuzz_logs/$name.what")" "$(cat "$fuzz_logs/$name.rc")"
    tail -n 12 "$fuzz_logs/$name.log"
    [ "$(cat "$fuzz_logs/$name.rc")" = 0 ] || fuzz_failed=1
  done
  rm -rf "$fuzz_logs"
  [ "$fuzz_failed" = 0 ] || { echo "a fuzz target found a failure (its report is above)"; exit 1; }
fi

if [ "${CANOPY_SKIP_TSAN:-0}" != 1 ]; then
  # ThreadSanitizer cannot share a build with ASan. Its reports inside gRPC, protobuf, Abseil and OpenSSL are
  # suppressed (tests/tsan.supp): Debian builds those libraries without TSan, so it sees their memory accesses but
  # not the atomics that order them, and reports races that are not there. A race between canopy's own threads is
  # reported and fails the stage; one between two callbacks that gRPC runs is suppressed with the rest.
  build_tsan="build-tsan"
  stage "ThreadSanitizer build (clang)"
  if [ -f "$build_tsan/CMakeCache.txt" ] &&
    ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' "$build_tsan/CMakeCache.txt"; then
    rm -rf "$build_tsan/CMakeCache.txt" "$build_tsan/CMakeFiles"
  fi
  cmake -S . -B "$build_tsan" -G Ninja "${launcher[@]}" "${fatbin[@]}" -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DCANOPY_SANITIZE_THREAD=ON -DCANOPY_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
  ninja -C "$build_tsan" -j "$jobs"
  stage "tests under ThreadSanitizer"
  check_ctest_entries "$build_tsan"
  # Every process writes its reports to a file of its own under $tsan_logs (a daemon's stderr is its log, which
  # its test removes), and any report fails the stage, whether or not its test noticed.
  tsan_logs=$(mktemp -d)
  tsan_rc=0
  # The protocol, config and scheduler suites test code that runs on one thread; the ASan stage covers them.
  TSAN_OPTIONS="second_deadlock_stack=1 log_path=$tsan_logs/report suppressions=$root/tests/tsan.supp" \
    ctest --test-dir "$build_tsan" --output-on-failure -j "$test_jobs" --output-junit ctest-junit.xml \
    -E '^test_(protocol|config|scheduler):' || tsan_rc=$?
  count_results "$build_tsan/ctest-junit.xml"
  if [ -n "$(ls -A "$tsan_logs")" ]; then
    echo "ThreadSanitizer reported (one file per process):"
    for report in "$tsan_logs"/*; do
      printf -- '---- %s\n' "$(basename "$report")"
      cat "$report"
    done
    tsan_rc=1
  fi
  rm -rf "$tsan_logs"
  [ "$tsan_rc" = 0 ] || exit "$tsan_rc"
fi

stage "all stages passed"
