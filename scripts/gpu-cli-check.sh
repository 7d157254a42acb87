#!/usr/bin/env bash
# End-to-end check of canopy through its CLI on a GPU machine: canopyd with its embedded default topology (one
# cuda chip per visible GPU, two subs) on a private socket and state directory, then
#   cuda_vmm buffers written and read back through `canopy buffer write/read` (a staged copy by the chip),
#   a graph that scales on chip0, copies across GPUs on chip1 (peer access) and sums into a shm buffer,
#   a chain of 501 dependent tasks on chip0 (ordered by its stream) and its final value,
#   a symmetric cuda_vmm buffer filled per rank and gathered on every chip,
#   peer_read with a pe outside the world refused with PE_OUT_OF_RANGE and exit code 1,
#   a clean shutdown that leaves no shm object behind.
# Usage: scripts/gpu-cli-check.sh [DIR]   DIR holds canopyd and canopy (default: build/daemon and build/cli).
# Exit status 0 when every check passed. Needs python3 for the number checks.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-}
if [ -n "$dir" ]; then
  canopyd=$dir/canopyd
  canopy=$dir/canopy
else
  canopyd=build/daemon/canopyd
  canopy=build/cli/canopy
fi
work=$(mktemp -d /tmp/canopy-gpu-cli.XXXXXX)
export CANOPY_SOCKET=$work/canopy.sock
daemon_pid=
cleanup() {
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid"; wait "$daemon_pid" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
step() { printf '\n$ %s\n' "$*"; "$@"; }
fail() { echo "gpu-cli-check: FAILED: $*"; echo "--- canopyd log"; cat "$work/canopyd.log"; exit 1; }
json_field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

"$canopyd" --socket "$CANOPY_SOCKET" --state-dir "$work/state" 2>"$work/canopyd.log" &
daemon_pid=$!
for _ in $(seq 1 300); do
  [ -S "$CANOPY_SOCKET" ] && "$canopy" status >/dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2>/dev/null || fail "canopyd exited at start"
  sleep 0.1
done
step "$canopy" status
gpus=$("$canopy" status --json | python3 -c '
import json, sys
print(sum(1 for w in json.load(sys.stdin)["workers"] if w.get("backend") == "cuda" and w["state"] == "running"))')
[ "$gpus" -ge 1 ] || fail "no running cuda chip"
echo "running cuda chips: $gpus"
last=chip$((gpus > 1 ? 1 : 0))

a=$("$canopy" buffer create --bytes 4096 --backend vmm --on chip0 --json | json_field id)
b=$("$canopy" buffer create --bytes 4096 --backend vmm --on "$last" --json | json_field id)
h=$("$canopy" buffer create --bytes 4096 --json | json_field id)
"$canopy" buffer show "$a" --json | grep -q '"cuda_vmm"' || fail "buffer $a is not cuda_vmm"
python3 -c 'import struct,sys; sys.stdout.buffer.write(struct.pack("<1024f", *[float(i) for i in range(1024)]))' >"$work/in.bin"
step "$canopy" buffer write "$a" --from "$work/in.bin"
step "$canopy" buffer read "$a" --to "$work/back.bin"
cmp "$work/in.bin" "$work/back.bin" || fail "a cuda_vmm buffer read back differs from what was written"
# Partial transfers at an offset.
step "$canopy" buffer read "$a" --to "$work/part.bin" --offset 1024 --bytes 512
cmp <(tail -c +1025 "$work/in.bin" | head -c 512) "$work/part.bin" || fail "a partial read differs"

cat >"$work/graph.json" <<GRAPH
{"tasks": [
  {"name": "double", "kernel": "scale", "on": "chip0",
   "args": [{"tensor": {"buffer": "$a", "dtype": "float32", "shape": [1024]}, "tag": "inout"},
            {"scalar": {"float32": 2.0}}]},
  {"name": "across", "kernel": "copy", "on": "$last",
   "args": [{"tensor": {"buffer": "$a", "dtype": "float32", "shape": [1024]}, "tag": "input"},
            {"tensor": {"buffer": "$b", "dtype": "float32", "shape": [1024]}, "tag": "output"}]},
  {"name": "sum", "kernel": "reduce_sum", "on": "$last",
   "args": [{"tensor": {"buffer": "$b", "dtype": "float32", "shape": [1024]}, "tag": "input"},
            {"tensor": {"buffer": "$h", "dtype": "float32", "shape": [1]}, "tag": "output"}]}
]}
GRAPH
step "$canopy" run "$work/graph.json" --wait
step "$canopy" buffer read "$h" --to "$work/sum.bin" --bytes 4
python3 - "$work/sum.bin" <<'PY' || fail "the graph's sum is wrong"
import struct, sys
got = struct.unpack("<f", open(sys.argv[1], "rb").read())[0]
want = float(2 * sum(range(1024)))
print("sum over the copy on the last GPU:", got, "expected", want)
assert got == want
PY

# A chain of 500 dependent tasks on chip0, which the chip's stream orders: y = 0, then y += a 500 times.
y=$("$canopy" buffer create --bytes 4096 --backend vmm --on chip0 --json | json_field id)
python3 - "$a" "$y" >"$work/chain.json" <<'PY'
import json, sys
a, y = sys.argv[1], sys.argv[2]
view = lambda b, tag: {"tensor": {"buffer": b, "dtype": "float32", "shape": [1024]}, "tag": tag}
tasks = [{"name": "zero", "kernel": "fill", "on": "chip0", "args": [view(y, "output"), {"scalar": {"float32": 0.0}}]}]
tasks += [{"name": "add%d" % k, "kernel": "axpy", "on": "chip0",
           "args": [view(a, "input"), view(y, "inout"), {"scalar": {"float32": 1.0}}]} for k in range(500)]
print(json.dumps({"tasks": tasks}))
PY
"$canopy" run "$work/chain.json" --wait --json >"$work/chain.out" || fail "the chain failed: $(head -c 2000 "$work/chain.out")"
python3 - "$work/chain.out" <<'PY' || fail "a task of the chain did not complete"
import json, sys
states = [t["state"] for t in json.load(open(sys.argv[1]))["tasks"]]
assert states == ["completed"] * 501, states[:5]
print("chain of 501 tasks on chip0: all completed")
PY
step "$canopy" buffer read "$y" --to "$work/chain.bin"
python3 - "$work/chain.bin" <<'PY' || fail "the chain's final value is wrong"
import struct, sys
v = struct.unpack("<1024f", open(sys.argv[1], "rb").read())
assert all(v[i] == 500.0 * 2 * i for i in range(1024)), v[:4]
print("chain result: y[i] = 1000 i for all 1024 elements")
PY
"$canopy" buffer release "$y"

world=chip0
[ "$gpus" -gt 1 ] && world=chip0,chip1
s=$("$canopy" buffer create --bytes 4096 --backend symmetric --world "$world" --json | json_field id)
ranks=$(( gpus > 1 ? 2 : 1 ))
for r in $(seq 0 $((ranks - 1))); do
  step "$canopy" submit fill --on "chip$r" --out "$s:float32:256" --scalar "float32:$((r + 1))" --wait
done
g=$("$canopy" buffer create --bytes $((ranks * 1024)) --json | json_field id)
for r in $(seq 0 $((ranks - 1))); do
  step "$canopy" submit allgather --on "chip$r" --in "$s:float32:256" --out "$g:float32:$((ranks * 256))" --wait
  "$canopy" buffer read "$g" --to "$work/gathered.bin"
  python3 - "$work/gathered.bin" "$ranks" <<'PY' || fail "allgather on chip$r is wrong"
import struct, sys
ranks = int(sys.argv[2])
v = struct.unpack("<%df" % (256 * ranks), open(sys.argv[1], "rb").read())
assert all(v[i] == float(i // 256 + 1) for i in range(256 * ranks)), v[:4]
print("allgather:", [v[256 * k] for k in range(ranks)])
PY
done
set +e
"$canopy" submit peer_read --on chip0 --in "$s:float32:256" --out "$g:float32:256" --scalar "int64:$ranks" --wait \
  >"$work/pe.out" 2>&1
rc=$?
set -e
cat "$work/pe.out"
[ "$rc" -eq 1 ] || fail "peer_read with pe = world exited $rc, expected 1"
grep -q PE_OUT_OF_RANGE "$work/pe.out" || fail "peer_read with pe = world did not say PE_OUT_OF_RANGE"

for id in "$a" "$b" "$s"; do
  "$canopy" buffer release "$id"
done
step "$canopy" buffer list
step "$canopy" shutdown
wait "$daemon_pid" || fail "canopyd exited with an error"
daemon_pid=
if ls /dev/shm | grep -q '^cnpy'; then
  ls -l /dev/shm | grep cnpy
  fail "shm objects were left behind"
fi
echo "gpu-cli-check: all checks passed ($gpus GPU(s))"
