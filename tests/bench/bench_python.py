#!/usr/bin/env python3
"""Benchmarks of the Python client against baselines measured in the same run (docs/performance.md).

Starts canopyd (build/daemon/canopyd, or $CANOPY_DAEMON) with one sim chip and two subs on a private
socket, then measures, as medians:
  - 64 MiB into a buffer and back out through its mapping (buffer.fd, mmap, copy, unmap), against a copy
    into a fresh shm mapping (shm_open, ftruncate, mmap, copy, unmap, unlink) and into an already-touched
    mapping, whose difference is the page-fault share;
  - 64 MiB through the socket as binary attachments (buffer.write / buffer.read), in GB/s;
  - one no-op task (sleep_ms 0 on a sub) from Python: execute (submit with wait, one round trip) and
    submit().result() (submit, then a wait on a wait lane), against one status request and against the C++
    client's submit_wait on the same daemon (build/tests/bench/bench_client_noop, run before and after);
  - a graph of 10 000 tasks built and submitted (until its future exists: the daemon accepted every task),
    and until it completed; no-op tasks, and fill tasks over 4-byte views of one buffer.

Usage: PYTHONPATH=python/src python3 tests/bench/bench_python.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python" / "src"))
import canopy  # noqa: E402
from canopy._wire import Connection  # noqa: E402

MIB = 1 << 20
SIZE = 64 * MIB


def start_daemon(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    sock = str(work / "canopy.sock")
    (work / "state").mkdir()
    config = {
        "node": {"name": "bench", "chips": [{"device": 0, "backend": "sim"}], "subs": 2},
        "control": {"socket": sock, "max_frame_bytes": 8 * MIB, "task_history": 100000},
        "state_dir": str(work / "state"),
        "log": {"level": "warn", "format": "text"},
    }
    (work / "canopy.json").write_text(json.dumps(config))
    binary = os.environ.get("CANOPY_DAEMON", str(ROOT / "build" / "daemon" / "canopyd"))
    proc = subprocess.Popen([binary, "--config", str(work / "canopy.json")], stderr=open(work / "log", "wb"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with canopy.connect(sock) as c:
                if all(w["state"] == "running" for w in c.status()["workers"]):
                    return proc, sock
        except canopy.Unreachable:
            pass
        time.sleep(0.02)
    proc.kill()
    raise SystemExit("canopyd did not start: " + (work / "log").read_text())


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def bench_mapping(c: canopy.Client, runs: int) -> list[tuple[str, float]]:
    src = np.random.default_rng(0).integers(0, 255, SIZE, dtype=np.uint8)
    dst = np.empty(SIZE, dtype=np.uint8)
    dst[:] = 1  # touched
    rows: list[tuple[str, float]] = []

    def fresh_shm() -> None:
        name = f"/dev/shm/canopy-bench-{os.getpid()}"
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(fd, SIZE)
            m = mmap.mmap(fd, SIZE, flags=mmap.MAP_SHARED)
            np.frombuffer(m, dtype=np.uint8)[:] = src
            m.close()
        finally:
            os.close(fd)
            os.unlink(name)

    touched = np.zeros(SIZE, dtype=np.uint8)  # anonymous memory, every page already faulted in

    def touched_copy() -> None:
        touched[:] = src

    with c.create_buffer(SIZE) as buf:

        def put() -> None:
            with buf.fds() as grant:
                m = mmap.mmap(grant.fds[0], SIZE, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
            np.frombuffer(m, dtype=np.uint8)[:] = src
            m.close()

        def get_fresh() -> None:
            with buf.fds("read") as grant:
                m = mmap.mmap(grant.fds[0], SIZE, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, prot=mmap.PROT_READ)
            out = np.array(np.frombuffer(m, dtype=np.uint8))  # a new array: its pages are faulted in too
            m.close()
            del out

        def get_into() -> None:
            with buf.fds("read") as grant:
                m = mmap.mmap(grant.fds[0], SIZE, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, prot=mmap.PROT_READ)
            dst[:] = np.frombuffer(m, dtype=np.uint8)
            m.close()

        def put_mapped() -> None:
            buf.numpy("uint8")[:] = src  # the Buffer keeps its mapping: no request, no page fault

        rows.append(("memcpy into a fresh shm mapping (baseline)", median_ms(fresh_shm, runs)))
        rows.append(("memcpy into a touched mapping (no page faults)", median_ms(touched_copy, runs)))
        rows.append(("put: buffer.fd, mmap, copy in, unmap", median_ms(put, runs)))
        rows.append(("get: buffer.fd, mmap, copy out to a new array, unmap", median_ms(get_fresh, runs)))
        rows.append(("get: buffer.fd, mmap, copy out to an existing array, unmap", median_ms(get_into, runs)))
        rows.append(("put into the kept mapping (Buffer.numpy view)", median_ms(put_mapped, runs)))
        assert np.array_equal(buf.numpy("uint8")[:4096], src[:4096])
        buf.close_mappings()
    return rows


def bench_socket(c: canopy.Client, runs: int) -> list[tuple[str, float]]:
    src = np.random.default_rng(1).integers(0, 255, SIZE, dtype=np.uint8)
    out = np.empty(SIZE, dtype=np.uint8)
    with c.create_buffer(SIZE) as buf:
        w = median_ms(lambda: buf.write(src), runs)
        r = median_ms(lambda: buf.readinto(out), runs)
        rn = median_ms(lambda: buf.read(), runs)
        assert np.array_equal(out, src)
    return [
        ("buffer.write, one 64 MiB attachment", w),
        ("buffer.read into an existing array, one attachment", r),
        ("buffer.read into a new bytearray, one attachment", rn),
    ]


def bench_latency(c: canopy.Client, calls: int) -> list[tuple[str, float]]:
    def samples(fn: Callable[[], object]) -> float:
        for _ in range(500):
            fn()
        ts = []
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts) * 1e6

    status = samples(c.status)
    # The C++ client's submit_wait against the same daemon, before and after Python's own: the same run.
    cpp_before = cpp_noop(c.socket_path, calls)
    execute = samples(lambda: c.execute("sleep_ms", "sub0", canopy.i64(0)))
    cpp_after = cpp_noop(c.socket_path, calls)
    future = samples(lambda: c.submit("sleep_ms", "sub0", canopy.i64(0)).result())
    rows = [
        ("one status request (baseline)", status),
        ("one no-op task: execute (submit with wait)", execute),
        ("one no-op task: submit().result()", future),
    ]
    if cpp_before is not None and cpp_after is not None:
        cpp = (cpp_before + cpp_after) / 2
        rows.append(("one no-op task: C++ client submit_wait (bench_client_noop, before and after)", cpp))
        print(f"Python execute / C++ submit_wait: {execute / cpp:.2f}x (target <= 1.5x: "
              f"{'met' if execute <= 1.5 * cpp else 'missed'})\n")
    return rows


def cpp_noop(socket_path: str, calls: int) -> float | None:
    """The median of bench_client_noop against the daemon at `socket_path`, in µs; None without the binary."""
    binary = os.environ.get("CANOPY_BENCH_CLIENT_NOOP", str(ROOT / "build" / "tests" / "bench" / "bench_client_noop"))
    if not os.access(binary, os.X_OK):
        print(f"({binary} not built: no C++ client baseline)\n")
        return None
    out = subprocess.run([binary, socket_path, str(calls)], check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1])


def bench_graph(c: canopy.Client, runs: int) -> list[tuple[str, float, float, float, float]]:
    """Per graph kind: built, built and submitted (run() returned: the daemon accepted every task), completed,
    and the daemon's own share: the same request sent on a raw connection, from its last byte sent to its
    reply's last byte read."""
    n = 10_000
    rows = []
    with c.create_buffer(4 * n) as buf:
        views = [canopy.Out(buf.tensor("float32", 1, byte_offset=4 * i)) for i in range(n)]
        kinds: dict[str, Callable[[canopy.Graph, int], object]] = {
            "no-op tasks (sleep_ms 0)": lambda g, i: g.task(None, "sleep_ms", "sub0" if i % 2 else "sub1", [0]),
            "fill tasks over 4-byte views of one buffer": lambda g, i: g.task(
                None, "fill", "sub0" if i % 2 else "sub1", [views[i], canopy.f32(1.0)]
            ),
        }
        raw = Connection(c.socket_path)
        for label, add in kinds.items():
            builds, submits, totals, daemon, size = [], [], [], [], 0
            for _ in range(runs + 1):
                t0 = time.perf_counter()
                g = canopy.Graph()
                for i in range(n):
                    add(g, i)
                t1 = time.perf_counter()
                f = c.run(g)
                t2 = time.perf_counter()
                assert f.result().ok
                t3 = time.perf_counter()
                builds.append(t1 - t0)
                submits.append(t2 - t0)
                totals.append(t3 - t0)
                body = ('{"op":"run","graph":' + g.text() + "}").encode()
                size = len(body)
                raw.send(body)
                t4 = time.perf_counter()
                reply, _ = raw.receive_raw()
                daemon.append(time.perf_counter() - t4)
                ids = canopy.GraphResult.from_body(reply, n)
                assert ids is not None
                c.wait(ids.ids[-1:])
                c.wait(ids.ids[:1])
            rows.append(
                (
                    f"{label} ({size / MIB:.2f} MiB of JSON)",
                    statistics.median(builds[1:]) * 1e3,
                    statistics.median(submits[1:]) * 1e3,
                    statistics.median(totals[1:]) * 1e3,
                    statistics.median(daemon[1:]) * 1e3,
                )
            )
        raw.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--skip-socket", action="store_true", help="leave out the attachment benchmark")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="canopy-bench-py-"))
    proc, sock = start_daemon(work)
    try:
        with canopy.connect(sock) as c:
            rows = bench_mapping(c, args.runs)
            base = rows[0][1]
            touched = rows[1][1]
            print(f"## 64 MiB through the mapping (median of {args.runs})\n")
            print("| path | ms | GB/s | ratio to the fresh-mapping memcpy |\n|---|---:|---:|---:|")
            for label, ms in rows:
                print(f"| {label} | {ms:.1f} | {SIZE / ms / 1e6:.2f} | {ms / base:.2f}x |")
            print(f"\npage faults: {(base - touched) / base * 100:.0f}% of the fresh-mapping memcpy\n")
            if not args.skip_socket:
                print(f"## 64 MiB through the socket (median of {args.runs})\n")
                print("| path | ms | GB/s |\n|---|---:|---:|")
                for label, ms in bench_socket(c, args.runs):
                    print(f"| {label} | {ms:.1f} | {SIZE / ms / 1e6:.2f} |")
                print()
            latency = bench_latency(c, args.calls)
            print(f"## One task (median of {args.calls}, after 500 warm-up calls)\n")
            print("| call | µs |\n|---|---:|")
            for label, us in latency:
                print(f"| {label} | {us:.1f} |")
            print(f"\n## A graph of 10 000 tasks (median of {args.runs})\n")
            print(
                "| graph | built ms | built and submitted ms | completed ms | the daemon's reply to run ms |\n"
                "|---|---:|---:|---:|---:|"
            )
            for label, b, s, t, d in bench_graph(c, args.runs):
                print(f"| {label} | {b:.1f} | {s:.1f} | {t:.1f} | {d:.1f} |")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
