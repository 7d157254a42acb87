#!/usr/bin/env bash
# Runs the cuda chip's [gpu] tests and the model-based GPU soak under ThreadSanitizer: the chip's frame loop and
# its launch queue's reporting thread run only where there is a GPU, so scripts/test.sh's TSan stage cannot reach
# them.
#
#   scripts/gpu-tsan.sh --stage DIR            on a build machine (no GPU needed): build build-tsan/ (clang, TSan,
#                                              the CUDA Toolkit) and copy canopyd, canopy, test_cuda_chip and
#                                              test_service, stripped, with their shared libraries beyond the C
#                                              runtime and tests/tsan.supp, into DIR
#   scripts/gpu-tsan.sh --prebuilt DIR [N]     on a GPU machine: run them, then the GPU soak on N more seeds
#                                              (default 20)
#
# Every process the tests start writes its reports to a file of its own under $OUT/tsan-reports (or a temporary
# folder, named at the end); any report fails the run. The binaries are stripped: a report names offsets such as
# (canopyd+0x1dc391), which `llvm-symbolizer --obj=build-tsan/daemon/canopyd 0x1dc391` resolves on the build
# machine. test_cuda_chip's comparison of 2^24 + 5 elements against the sim chip is left out: at -O0 under TSan it
# takes many minutes, and it runs no thread the other cases do not.
# Exit status: 0 when every test passed and no process reported, 1 otherwise, 2 when nothing could be built or found.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

case "${1:-}" in
--stage | --prebuilt)
  mode=${1#--}
  dir=${2:-}
  [ -n "$dir" ] || { echo "gpu-tsan: $1 needs a directory" >&2; exit 2; }
  ;;
*) echo "usage: $0 --stage DIR | --prebuilt DIR [SEEDS]" >&2; exit 2 ;;
esac
binaries=(daemon/canopyd cli/canopy tests/cuda/test_cuda_chip tests/service/test_service)

if [ "$mode" = stage ]; then
  build=build-tsan
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$build" -G Ninja "${launcher[@]}" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCANOPY_SANITIZE_THREAD=ON -DCANOPY_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null || exit 2
  ninja -C "$build" -j "${CANOPY_JOBS:-$(nproc)}" canopyd canopy test_cuda_chip test_service || exit 2
  if ! grep -q 'CANOPY_HAVE_CUDA_TOOLKIT=1' "$build/build.ninja"; then
    echo "gpu-tsan: $build was built without the CUDA Toolkit; its cuda chips could not run" >&2
    exit 2
  fi
  mkdir -p "$dir"
  for binary in "${binaries[@]}"; do
    strip -o "$dir/$(basename "$binary")" "$build/$binary"
    ldd "$build/$binary" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libgcc_s|ld-linux)[.-]' |
      while read -r lib; do [ -e "$dir/$(basename "$lib")" ] || cp -L "$lib" "$dir/"; done
  done
  cp tests/tsan.supp "$dir/"
  echo "gpu-tsan: staged ${binaries[*]##*/}, their libraries and tsan.supp in $dir ($(du -sh "$dir" | cut -f1))"
  exit 0
fi

seeds=${3:-20}
if [ ! -d "$dir" ]; then
  echo "gpu-tsan: no folder $dir; stage one on a build machine with '$0 --stage $dir' and copy it here" >&2
  exit 2
fi
staged=$(cd "$dir" && pwd)
case "$seeds" in
'' | *[!0-9]*) echo "gpu-tsan: SEEDS must be a count of soak seeds, not '$seeds'" >&2; exit 2 ;;
esac
for binary in "${binaries[@]}"; do
  [ -x "$staged/$(basename "$binary")" ] || { echo "gpu-tsan: no $(basename "$binary") in $dir" >&2; exit 2; }
done
reports=${OUT:+$OUT/tsan-reports}
reports=${reports:-$(mktemp -d /tmp/gpu-tsan.XXXXXX)}
mkdir -p "$reports"
export LD_LIBRARY_PATH="$staged${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CANOPY_E2E_CANOPYD=$staged/canopyd CANOPY_E2E_CANOPY=$staged/canopy
export TSAN_OPTIONS="second_deadlock_stack=1 log_path=$reports/report suppressions=$staged/tsan.supp"
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "gpu-tsan: no GPU found (nvidia-smi -L lists none); is the NVIDIA driver installed?" >&2
  exit 2
fi
nvidia-smi -L

failed=0
# SIGKILL at the limit: a test ended by SIGTERM would have Catch2's handler allocate inside the signal, which TSan
# reports.
run() {
  echo "==== $*"
  timeout -s KILL 600 "$@" || failed=1
}
run "$staged/test_cuda_chip" '[gpu]~"element-wise kernels over 2^24*"'
run "$staged/test_service" '[gpu]'
soak='soak: the same on a cuda chip beside a sim chip and a sub*'
passed=0
for ((i = 1; i <= seeds; ++i)); do
  if CANOPY_SOAK_SEED=$((10000 + 100 * i)) timeout -s KILL 120 "$staged/test_service" "$soak" >/dev/null 2>&1; then
    passed=$((passed + 1))
  else
    echo "gpu-tsan: the GPU soak failed on seed $((10000 + 100 * i))"
    failed=1
  fi
done
echo "==== the GPU soak under TSan: $passed of $seeds more seeds passed"

if [ -n "$(ls -A "$reports")" ]; then
  echo "gpu-tsan: ThreadSanitizer reported, in $reports (one file per process):"
  ls "$reports"
  failed=1
else
  echo "gpu-tsan: no process reported"
fi
exit "$failed"
