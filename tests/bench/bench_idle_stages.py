#!/usr/bin/env python3
"""Where a lone task's time goes (docs/performance.md, "One task on an idle machine").

Starts canopyd (build/daemon/canopyd, or the path given) with one chip (a cuda chip on device 0 with --cuda, else
a sim chip) and one sub on a private socket, then sends one task at a time with "wait": true over one connection,
each after --gap-ms of idleness, and prints the medians of four stages from the times the reply carries
(CLOCK_MONOTONIC, which time.monotonic_ns() reads too): the request sent -> recorded by the daemon
(submitted_ns), -> its worker starts it (start_ns), the task itself (end_ns - start_ns), its end -> the reply
read; and the whole call. Tasks: scale over 1024 float32 on the chip, sleep_ms 0 on the chip (no kernel), scale
on the sub. As the machine's floor it prints one byte echoed by another process blocked in epoll_wait after the
same gap, and back to back. The first --warmup calls of each kind are not counted.

Usage: python3 tests/bench/bench_idle_stages.py [--canopyd PATH] [--cuda] [--calls N] [--gap-ms MS]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time


def echo_floor(gap: float, calls: int, warmup: int) -> float:
    """Median microseconds of a one-byte echo through another process blocked in epoll_wait."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        ours.close()
        poll = select.epoll()
        poll.register(theirs.fileno(), select.EPOLLIN)
        while True:
            poll.poll()
            data = theirs.recv(64)
            if not data:
                os._exit(0)
            theirs.sendall(data)
    theirs.close()
    times = []
    for _ in range(calls + warmup):
        time.sleep(gap)
        start = time.monotonic_ns()
        ours.sendall(b"x")
        ours.recv(64)
        times.append(time.monotonic_ns() - start)
    ours.close()
    os.waitpid(pid, 0)
    return statistics.median(times[warmup:]) / 1000


class Connection:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)

    def _exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise RuntimeError("canopyd closed the connection")
            data += chunk
        return data

    def request(self, body: dict) -> dict:
        data = json.dumps(body).encode()
        self.sock.sendall(struct.pack("<I", len(data)) + data)
        (length,) = struct.unpack("<I", self._exact(4))
        reply = json.loads(self._exact(length))
        if not reply.get("ok", False):
            raise RuntimeError(f"canopyd refused {body.get('op')}: {reply}")
        return reply


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--canopyd", default=os.path.join(root, "build", "daemon", "canopyd"))
    parser.add_argument("--cuda", action="store_true", help="a cuda chip on device 0 instead of a sim chip")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--gap-ms", type=float, default=5.0)
    args = parser.parse_args()
    gap = args.gap_ms / 1000

    state = tempfile.mkdtemp(prefix="canopy-idle-")
    config = {
        "node": {"name": "idle", "level": 3, "chips": [{"device": 0, "backend": "cuda" if args.cuda else "sim"}],
                 "subs": 1},
        "control": {"socket": os.path.join(state, "canopy.sock")},
        "state_dir": os.path.join(state, "state"),
        "log": {"level": "warn", "format": "text"},
    }
    with open(os.path.join(state, "config.json"), "w") as f:
        json.dump(config, f)
    if not os.access(args.canopyd, os.X_OK):
        print(f"bench_idle_stages: no canopyd at {args.canopyd} (build it, or name one with --canopyd)",
              file=sys.stderr)
        return 1
    log_path = os.path.join(state, "canopyd.log")
    log = open(log_path, "w")
    daemon = subprocess.Popen([args.canopyd, "--config", os.path.join(state, "config.json")], stderr=log)
    try:
        deadline = time.monotonic() + 30
        conn = None
        while conn is None:
            try:
                conn = Connection(config["control"]["socket"])
                workers = conn.request({"op": "status"})["workers"]
                if any(w["state"] != "running" for w in workers):
                    conn = None
                    raise OSError("workers starting")
            except OSError:
                if daemon.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    with open(log_path) as f:
                        lines = f.read().strip().splitlines()
                    last = lines[-1] if lines else "(nothing logged)"
                    print(f"bench_idle_stages: canopyd did not come up (exit {daemon.poll()}): {last}\n"
                          f"  its log: {log_path}", file=sys.stderr)
                    return 1
                time.sleep(0.05)
        buffer = conn.request({"op": "buffer.create", "bytes": 4096})["buffer"]["id"]
        view = {"tensor": {"buffer": buffer, "dtype": "float32", "shape": [1024]}, "tag": "inout"}
        kinds = [
            ("scale on chip0", {"kernel": "scale", "on": "chip0", "args": [view, {"scalar": {"float32": 0.999}}]}),
            ("sleep_ms 0 on chip0", {"kernel": "sleep_ms", "on": "chip0", "args": [{"scalar": {"int64": 0}}]}),
            ("scale on sub0", {"kernel": "scale", "on": "sub0", "args": [view, {"scalar": {"float32": 0.999}}]}),
        ]
        chip = "cuda" if args.cuda else "sim"
        print(f"bench_idle_stages: {chip} chip0 and sub0, {args.calls} calls of each after {args.gap_ms:g} ms, "
              f"{os.cpu_count()} CPUs; medians in us")
        print()
        print("| task | sent -> recorded | -> worker starts it | runs | its end -> reply read | total |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, task in kinds:
            rows = []
            for _ in range(args.calls + args.warmup):
                time.sleep(gap)
                sent = time.monotonic_ns()
                state_of = conn.request({"op": "submit", "wait": True, "task": task})["task"]
                read = time.monotonic_ns()
                if state_of["state"] != "completed":
                    raise RuntimeError(f"{name}: {state_of}")
                rows.append((state_of["submitted_ns"] - sent, state_of["start_ns"] - state_of["submitted_ns"],
                             state_of["end_ns"] - state_of["start_ns"], read - state_of["end_ns"], read - sent))
            medians = [statistics.median(column) / 1000 for column in zip(*rows[args.warmup:])]
            print(f"| {name} | " + " | ".join(f"{m:.1f}" for m in medians) + " |")
        print()
        print(f"one byte echoed by another process blocked in epoll_wait: "
              f"{echo_floor(gap, args.calls, args.warmup):.1f} us after {args.gap_ms:g} ms, "
              f"{echo_floor(0, args.calls, args.warmup):.1f} us back to back")
        conn.request({"op": "shutdown"})
        daemon.wait(timeout=30)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
