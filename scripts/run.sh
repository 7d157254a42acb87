#!/usr/bin/env bash
# The main job: builds canopy, starts canopyd with its embedded default topology on a private socket
# and state directory, and runs a short demo through the canopy CLI: status, a buffer written from a
# file, a graph with inferred dependencies, the result read back, and a clean shutdown.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
ninja -C build -j "${CANOPY_JOBS:-$(nproc)}" canopyd canopy

canopyd=build/daemon/canopyd
canopy=build/cli/canopy
work=$(mktemp -d /tmp/canopy-demo.XXXXXX)
export CANOPY_SOCKET=$work/canopy.sock
daemon_pid=
cleanup() {
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid"; wait "$daemon_pid" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step "$canopyd" --check-config
"$canopyd" --socket "$CANOPY_SOCKET" --state-dir "$work/state" 2>"$work/canopyd.log" &
daemon_pid=$!
for _ in $(seq 1 100); do
  [ -S "$CANOPY_SOCKET" ] && "$canopy" status >/dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/canopyd.log"; exit 1; }
  sleep 0.1
done

step "$canopy" status
id=$("$canopy" buffer create --bytes 4096 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
echo "created buffer $id"
python3 -c 'import struct,sys; sys.stdout.buffer.write(struct.pack("<256f", *[float(i) for i in range(256)]))' >"$work/in.bin"
step "$canopy" buffer write "$id" --from "$work/in.bin"
cat >"$work/graph.json" <<GRAPH
{"tasks": [
  {"name": "scale-left",  "kernel": "scale", "on": "chip0",
   "args": [{"tensor": {"buffer": "$id", "dtype": "float32", "shape": [16, 8], "strides": [16, 1]}, "tag": "inout"},
            {"scalar": {"float32": 2.0}}]},
  {"name": "scale-right", "kernel": "scale", "on": "sub0",
   "args": [{"tensor": {"buffer": "$id", "dtype": "float32", "shape": [16, 8], "strides": [16, 1], "byte_offset": 32}, "tag": "inout"},
            {"scalar": {"float32": -1.0}}]},
  {"name": "sum", "kernel": "reduce_sum", "on": "sub1",
   "args": [{"tensor": {"buffer": "$id", "dtype": "float32", "shape": [256]}, "tag": "input"},
            {"tensor": {"buffer": "$id", "dtype": "float32", "shape": [1], "byte_offset": 2048}, "tag": "output"}]}
]}
GRAPH
step "$canopy" run "$work/graph.json" --wait
step "$canopy" buffer read "$id" --to "$work/out.bin"
python3 - "$work/out.bin" <<'PY'
import struct, sys
v = struct.unpack("<1024f", open(sys.argv[1], "rb").read())
print("first row after the graph:", v[:16])
# scale-left doubled columns 0..7 of each 16-wide row, scale-right negated columns 8..15; sum is the
# total of the first 256 values after both, written at element 512.
expect = [ (2*i if i % 16 < 8 else -i) for i in range(256)]
assert list(v[:256]) == [float(x) for x in expect], "unexpected values"
assert v[512] == float(sum(expect)), (v[512], sum(expect))
print("sum written by reduce_sum:", v[512], "(expected", float(sum(expect)), ")")
PY
step "$canopy" tasks
step "$canopy" status
step "$canopy" shutdown
wait "$daemon_pid"; daemon_pid=
echo
echo "canopyd exited cleanly; its log:"
cat "$work/canopyd.log"
IFS=. read -r owner bid gen <<<"$id"
shm=$(printf 'cnpy%s-%x-%x' "${owner:0:8}" "$bid" "$gen")
if [ -e "/dev/shm/$shm" ]; then
  echo "the buffer's shm object /dev/shm/$shm was left behind"
  exit 1
fi
echo "the buffer's shm object /dev/shm/$shm is gone"
