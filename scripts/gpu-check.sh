#!/usr/bin/env bash
# Runs every [gpu] test of canopy on this machine's GPUs, then the CLI against a real canopyd
# (scripts/gpu-cli-check.sh), then the Python package's gpu tests (python/tests/test_gpu.py, with the machine's
# python3 and torch), then the GPU benchmarks (tests/bench/bench_gpu_*), and reports the results on stdout (and, when $OUT is set, in $OUT/gpu-check.log).
#
#   scripts/gpu-check.sh                  on a GPU machine: install dependencies (scripts/install-deps.sh),
#                                         build test_cuda and test_cuda_chip with the CUDA Toolkit in
#                                         build-gpu/ (CANOPY_GPU_BUILD_DIR), run them
#   scripts/gpu-check.sh --stage DIR      on a build machine (no GPU needed): build as above and copy the two
#                                         test executables and the benchmarks, stripped, into DIR with this libstdc++ as a fallback
#   scripts/gpu-check.sh --prebuilt DIR   on a GPU machine: run the executables staged in DIR, no build (for GPU
#                                         machines where apt cannot install the build dependencies)
#
# It prints the GPUs, driver version and CUDA version first. Exit status: 0 when every test passed, 1 when one
# failed, 2 when it could not build or find the tests. Builds with all cores; on 16 cores a fresh build and the
# run take about 3-4 minutes. The tests themselves need /dev/shm (a few hundred MiB) and, for the two-GPU test,
# two visible GPUs (it skips with one).
# Environment: CUDA_HOME (default /usr/local/cuda), CANOPY_JOBS (default nproc), CANOPY_GPU_BUILD_DIR (default
# build-gpu).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

mode=build
dir=""
case "${1:-}" in
--stage) mode=stage; dir=${2:?"--stage needs a directory"} ;;
--prebuilt) mode=prebuilt; dir=${2:?"--prebuilt needs a directory"} ;;
"") ;;
*) echo "usage: $0 [--stage DIR | --prebuilt DIR]" >&2; exit 2 ;;
esac

if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  log="$OUT/gpu-check.log"
else
  log=$(mktemp /tmp/gpu-check.XXXXXX.log)
fi
: >"$log"
say() { printf '%s\n' "$*" | tee -a "$log"; }
stage() { say ""; say "==== $* ===="; }
# Runs a command, its output to stdout and the log; returns its status.
run_logged() { "$@" 2>&1 | tee -a "$log"; return "${PIPESTATUS[0]}"; }

cuda_home=${CUDA_HOME:-/usr/local/cuda}
build_dir=${CANOPY_GPU_BUILD_DIR:-build-gpu}
# The GPU benchmarks (tests/bench/bench_gpu_*.cpp), run after the tests.
benches=()
for source in tests/bench/bench_gpu_*.cpp; do
  [ -e "$source" ] && benches+=("$(basename "$source" .cpp)")
done
jobs=${CANOPY_JOBS:-$(nproc)}
started=$(date +%s)

build() {
  stage "build (CUDA Toolkit at $cuda_home)"
  if ! scripts/install-deps.sh 2>&1 | tee -a "$log"; then
    say "gpu-check: installing the build dependencies failed; apt is unusable here (no network, no root, or"
    say "  packages this distribution lacks, e.g. Catch2 v2). Build on a machine that has them with"
    say "  'scripts/gpu-check.sh --stage DIR', copy DIR here, and run 'scripts/gpu-check.sh --prebuilt DIR'."
    exit 2
  fi
  local launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  local configured
  configured=$(mktemp /tmp/gpu-check-cmake.XXXXXX)
  if ! cmake -S . -B "$build_dir" -G Ninja "${launcher[@]}" -DCANOPY_BENCH=ON -DCUDAToolkit_ROOT="$cuda_home" \
    >"$configured" 2>&1; then
    tee -a "$log" <"$configured"
    say "gpu-check: cmake failed"
    exit 2
  fi
  grep "canopy:" "$configured" | tee -a "$log"
  if ! grep -q "CUDA parts on" "$configured"; then
    say "gpu-check: the CUDA Toolkit was not found at $cuda_home; the cuda chip would not be built"
    exit 2
  fi
  rm -f "$configured"
  if ! run_logged ninja -C "$build_dir" -j "$jobs" test_cuda test_cuda_chip test_service test_remote canopyd canopy \
    "${benches[@]}"; then
    say "gpu-check: the build failed"
    exit 2
  fi
  tests_dir=$build_dir/tests/cuda
  bench_dir=$build_dir/tests/bench
  bin_dir=$build_dir
}

if [ "$mode" = stage ]; then
  build
  mkdir -p "$dir"
  strip -o "$dir/test_cuda" "$tests_dir/test_cuda"
  strip -o "$dir/test_cuda_chip" "$tests_dir/test_cuda_chip"
  strip -o "$dir/test_service" "$build_dir/tests/service/test_service"
  strip -o "$dir/test_remote" "$build_dir/tests/remote/test_remote"
  for bench in "${benches[@]}"; do
    strip -o "$dir/$bench" "$bench_dir/$bench"
  done
  strip -o "$dir/canopyd" "$build_dir/daemon/canopyd"
  strip -o "$dir/canopy" "$build_dir/cli/canopy"
  # canopyd's shared libraries beyond the C and C++ runtimes, for GPU machines that lack them.
  ldd "$build_dir/daemon/canopyd" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libgcc_s|libstdc\+\+|ld-linux)[.-]' |
    while read -r lib; do cp -L "$lib" "$dir/"; done
  cp "$(g++ -print-file-name=libstdc++.so.6)" "$dir/"
  say "gpu-check: staged test_cuda, test_cuda_chip, test_service, test_remote, ${benches[*]} and libstdc++.so.6 in $dir"
  exit 0
fi

stage "GPUs"
if ! command -v nvidia-smi >/dev/null; then
  say "gpu-check: nvidia-smi not found; is the NVIDIA driver installed?"
else
  run_logged nvidia-smi
  run_logged nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total,compute_cap --format=csv
fi
say "CUDA Toolkit: $("$cuda_home/bin/nvcc" --version 2>/dev/null | grep release || echo "none at $cuda_home")"
say "libcuda: $(ldconfig -p 2>/dev/null | grep -m1 'libcuda.so.1' || echo 'not in the loader cache')"
# cuBLASLt (matmul on cuda chips, loaded with dlopen): the loader's copy, else the toolkit's or the one a Python
# wheel ships, named to the chips through CANOPY_CUBLASLT. Without one, matmul runs on canopy's own kernel.
if [ -z "${CANOPY_CUBLASLT:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcublasLt.so.1[23] '; then
  for candidate in "$cuda_home"/lib64/libcublasLt.so.13 "$cuda_home"/lib64/libcublasLt.so.12 \
    $(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' \
      2>/dev/null | sed 's|$|/libcublasLt.so.13|'); do
    if [ -e "$candidate" ]; then
      export CANOPY_CUBLASLT=$candidate
      break
    fi
  done
fi
say "cuBLASLt: ${CANOPY_CUBLASLT:-$(ldconfig -p 2>/dev/null | grep -m1 'libcublasLt.so.1[23] ' || echo 'none found')}"
say "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>}  /dev/shm: $(df -h /dev/shm | awk 'NR==2 {print $4 " free"}')"

if [ "$mode" = prebuilt ]; then
  tests_dir=$dir
  bench_dir=$dir
  bin_dir=$dir
  if [ ! -x "$tests_dir/test_cuda" ] || [ ! -x "$tests_dir/test_cuda_chip" ]; then
    say "gpu-check: no test_cuda / test_cuda_chip in $tests_dir"
    exit 2
  fi
  if ! "$tests_dir/test_cuda" --list-tests >/dev/null 2>&1 && [ -e "$tests_dir/libstdc++.so.6" ]; then
    say "gpu-check: using the staged libstdc++.so.6"
    staged=$(cd "$tests_dir" && pwd)
    export LD_LIBRARY_PATH="$staged${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  # canopyd's staged libraries, used where the machine has none of its own.
  if ! "$dir/canopyd" --help >/dev/null 2>&1; then
    staged=$(cd "$dir" && pwd)
    export LD_LIBRARY_PATH="$staged${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
else
  build
fi

failed=0
run_tests() {
  local name=$1
  shift
  stage "$name $*"
  if ! run_logged timeout 300 "$tests_dir/$name" "$@" --durations yes; then
    failed=1
  fi
}
# In-process: driver, context, module, launches, registrations, the Launcher against the CPU kernels.
run_tests test_cuda "[gpu]"
# Processes: raw cuda chips, supervisors with cuda and sim chips, faults, two GPUs.
run_tests test_cuda_chip "[gpu]"
# A cuda chip that cannot start (CUDA_VISIBLE_DEVICES="" on a GPU machine) and the comparison harness.
run_tests test_cuda_chip "[chip]~[gpu]"
# Daemons with cuda chips: a cuda_vmm buffer through attachments, and one on a remote host's chip through an L4.
service_tests_dir=$tests_dir
[ "$mode" = prebuilt ] || service_tests_dir=$build_dir/tests
export CANOPY_E2E_CANOPYD=$(cd "$bin_dir" && pwd)/canopyd CANOPY_E2E_CANOPY=$(cd "$bin_dir" && pwd)/canopy
[ "$mode" = prebuilt ] || export CANOPY_E2E_CANOPYD=$build_dir/daemon/canopyd CANOPY_E2E_CANOPY=$build_dir/cli/canopy
for t in service/test_service remote/test_remote; do
  binary=$service_tests_dir/$t
  [ "$mode" = prebuilt ] && binary=$service_tests_dir/${t#*/}
  stage "${t#*/} [gpu]"
  run_logged timeout 300 "$binary" "[gpu]" --durations yes || failed=1
done
unset CANOPY_E2E_CANOPYD CANOPY_E2E_CANOPY

# The CLI against a real canopyd with one cuda chip per GPU.
stage "gpu-cli-check"
if [ "$mode" = prebuilt ]; then
  run_logged timeout 300 scripts/gpu-cli-check.sh "$bin_dir" || failed=1
else
  run_logged timeout 300 scripts/gpu-cli-check.sh || failed=1
fi

# The Python package's [gpu] tests: a cuda_vmm buffer imported through ctypes and handed to torch by DLPack.
stage "python client (pytest -m gpu)"
if [ "$mode" = prebuilt ]; then daemon=$bin_dir/canopyd; else daemon=$build_dir/daemon/canopyd; fi
if python3 -c 'import torch, numpy, pytest' 2>/dev/null; then
  # canopyd keeps the library path it runs with here; python3 (and torch) runs with the machine's own.
  wrapper=$(mktemp /tmp/canopyd-wrapper.XXXXXX)
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "'${LD_LIBRARY_PATH:-}'" "'$(readlink -f "$daemon")'" >"$wrapper"
  chmod +x "$wrapper"
  run_logged env -u LD_LIBRARY_PATH CANOPY_DAEMON="$wrapper" PYTHONPATH=python/src timeout 300 \
    python3 -m pytest -q -rs -p no:cacheprovider -m gpu python/tests/test_gpu.py || failed=1
  rm -f "$wrapper"
else
  say "gpu-check: skipped: no python3 with torch, numpy and pytest here; python/tests/test_gpu.py did not run"
fi

for bench in "${benches[@]}"; do
  if [ -x "$bench_dir/$bench" ]; then
    stage "$bench"
    run_logged timeout 300 "$bench_dir/$bench" || failed=1
  fi
done

stage "summary"
# Tests that skipped (too few GPUs) or ran around a known gap say so in a warning.
notes=$(grep -h "BLOCKED\|skipped:" "$log" | sed 's/^ */  /' | sort | uniq -c)
[ -n "$notes" ] && say "warnings (count, first line):" && say "$notes"
if [ "$failed" -eq 0 ]; then
  say "gpu-check: all [gpu] tests passed in $(($(date +%s) - started)) s"
else
  say "gpu-check: some tests FAILED (see above) after $(($(date +%s) - started)) s"
fi
exit "$failed"
