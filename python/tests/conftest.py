"""A real canopyd for the tests: built from the tree, on a private socket and state directory.

$CANOPY_DAEMON names the binary (default: build/daemon/canopyd of this checkout). The session's daemon has
two sim chips and two subs, fault kernels on, and uid 65534 (nobody) allowed but not an admin, so the
authorization tests can run a second uid when the tests run as root.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

import canopy

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534


def daemon_path() -> Path:
    path = Path(os.environ.get("CANOPY_DAEMON", ROOT / "build" / "daemon" / "canopyd"))
    if not path.is_file():
        pytest.fail(f"canopyd not found at {path}: build it (ninja -C build canopyd) or set CANOPY_DAEMON")
    return path


class Daemon:
    """One canopyd process with its own socket and state directory, stopped and removed by stop()."""

    def __init__(self, **overrides: Any) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="canopy-py-"))
        os.chmod(self.dir, 0o755)  # another uid's client reaches the socket inside
        self.socket = str(self.dir / "canopy.sock")
        config: dict[str, Any] = {
            "node": {
                "name": "pytest",
                "chips": [{"device": 0, "backend": "sim"}, {"device": 1, "backend": "sim"}],
                "subs": 2,
            },
            "control": {"socket": self.socket, "allow_uids": [NOBODY], "max_frame_bytes": 8 << 20},
            "state_dir": str(self.dir / "state"),
            "log": {"level": "warn", "format": "text"},
            "testing": {"fault_kernels": True},
            "supervision": {"backoff_initial_ms": 10, "drain_timeout_ms": 2000},
        }
        for key, value in overrides.items():
            config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
        (self.dir / "state").mkdir()
        self.config = self.dir / "canopy.json"
        self.config.write_text(json.dumps(config))
        self.log = open(self.dir / "canopyd.log", "wb")
        self.proc = subprocess.Popen(
            [str(daemon_path()), "--config", str(self.config)], stdout=self.log, stderr=subprocess.STDOUT
        )
        self.wait_ready()

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"canopyd exited {self.proc.returncode}: {self.log_text()}")
            try:
                with canopy.connect(self.socket) as c:
                    if all(w["state"] == "running" for w in c.status()["workers"]):
                        return
            except canopy.Unreachable:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"canopyd did not come up within {timeout} s: {self.log_text()}")

    def log_text(self) -> str:
        self.log.flush()
        return (self.dir / "canopyd.log").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    d = Daemon()
    yield d
    d.stop()


@pytest.fixture
def client(daemon: Daemon) -> Iterator[canopy.Client]:
    with canopy.connect(daemon.socket) as c:
        yield c


@pytest.fixture
def buf(client: canopy.Client) -> Iterator[canopy.Buffer]:
    with client.create_buffer(4096) as b:
        yield b
