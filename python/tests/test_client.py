"""connect, status, worker.restart, metrics, modules, shutdown, the error classes and authorization."""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Callable

import pytest

import canopy
from conftest import NOBODY, Daemon


def test_connect_reads_canopy_socket_from_the_environment(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANOPY_SOCKET", daemon.socket)
    with canopy.connect() as c:
        assert c.socket_path == daemon.socket
        assert c.status()["node"]["name"] == "pytest"


def test_connect_defaults_to_the_system_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CANOPY_SOCKET", raising=False)
    try:
        canopy.connect().close()
    except canopy.Unreachable as e:
        assert "/run/canopy/canopy.sock" in e.message


def test_connect_to_nothing_is_unreachable(tmp_path: Any) -> None:
    with pytest.raises(canopy.Unreachable) as e:
        canopy.connect(str(tmp_path / "none.sock"))
    assert e.value.code == "UNREACHABLE"
    assert isinstance(e.value, ConnectionError) and isinstance(e.value, canopy.CanopyError)
    assert "no such socket" in e.value.message


def test_connect_to_a_socket_nobody_serves_is_unreachable(tmp_path: Any) -> None:
    path = str(tmp_path / "dead.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()  # bound, never listening: connection refused
    with pytest.raises(canopy.Unreachable, match="cannot connect"):
        canopy.connect(path)


def test_a_closed_client_refuses_requests(daemon: Daemon) -> None:
    c = canopy.connect(daemon.socket)
    c.close()
    with pytest.raises(canopy.Unreachable, match="closed"):
        c.status()


def test_a_connection_the_daemon_closed_is_replaced(daemon: Daemon, client: canopy.Client) -> None:
    client.status()
    # A frame over max_frame_bytes makes the daemon reply BAD_REQUEST and close the connection.
    with pytest.raises(canopy.BadRequest, match="frame length"):
        client.request("status", pad="x" * (9 << 20))
    assert client.status()["workers"]


def test_status_lists_every_worker(client: canopy.Client) -> None:
    s = client.status()
    paths = sorted(w["path"] for w in s["workers"])
    assert paths == ["/chip0", "/chip1", "/sub0", "/sub1"]
    assert s["pid"] > 0 and s["node"]["level"] == 3


def test_restart_worker_brings_it_back(client: canopy.Client, daemon: Daemon) -> None:
    assert client.restart_worker("sub1") in ("/sub1", "sub1")
    daemon.wait_ready()
    with pytest.raises(canopy.UnknownWorker) as e:
        client.restart_worker("sub7")
    assert e.value.message == "no worker 'sub7' (children: /chip0, /chip1, /sub0, /sub1)"


def test_metrics_is_prometheus_text(client: canopy.Client) -> None:
    text = client.metrics()
    assert "canopy_tasks_total" in text and "canopy_worker_up" in text


def test_request_sends_any_op_and_raises_its_error(client: canopy.Client) -> None:
    assert client.request("buffer.list")["ok"] is True
    with pytest.raises(canopy.BadRequest) as e:
        client.request("no.such.op")
    assert e.value.message == 'unknown op "no.such.op"'


def test_every_code_has_its_class() -> None:
    codes = {
        "INVALID_TENSOR": canopy.InvalidTensor,
        "INVALID_DESCRIPTOR": canopy.InvalidDescriptor,
        "UNKNOWN_BUFFER": canopy.UnknownBuffer,
        "STALE_BUFFER": canopy.StaleBuffer,
        "ACCESS_DENIED": canopy.AccessDenied,
        "OVERLAPPING_WRITES": canopy.OverlappingWrites,
        "UNREACHABLE_BUFFER": canopy.UnreachableBuffer,
        "PE_OUT_OF_RANGE": canopy.PeOutOfRange,
        "UNKNOWN_KERNEL": canopy.UnknownKernel,
        "UNKNOWN_WORKER": canopy.UnknownWorker,
        "NO_CONSUMER": canopy.NoConsumer,
        "WORKER_DIED": canopy.WorkerDied,
        "KERNEL_FAILED": canopy.KernelFailed,
        "TIMEOUT": canopy.Timeout,
        "DEPENDENCY_FAILED": canopy.DependencyFailed,
        "BAD_REQUEST": canopy.BadRequest,
        "UNAUTHORIZED": canopy.Unauthorized,
        "CANCELLED": canopy.Cancelled,
    }
    for code, cls in codes.items():
        e = canopy.errors.error_for(code, "what went wrong")
        assert type(e) is cls and e.code == code and e.message == "what went wrong"
        assert isinstance(e, canopy.CanopyError)
        assert str(e) == f"{code}: what went wrong"
    other = canopy.errors.error_for("SOMETHING_NEW", "m")
    assert type(other) is canopy.CanopyError and other.code == "SOMETHING_NEW"


def test_shutdown_stops_the_daemon() -> None:
    d = Daemon()
    try:
        with canopy.connect(d.socket) as c:
            c.shutdown()
        assert d.proc.wait(timeout=15) == 0
        with pytest.raises(canopy.Unreachable):
            canopy.connect(d.socket)
    finally:
        d.stop()


# -- another uid --------------------------------------------------------------------------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="running a client as another uid needs root")


def as_uid(uid: int, action: Callable[[], Any]) -> str:
    """Runs ``action`` in a child process with ``uid`` and returns what it raised (code: message) or "ok"."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to uid, run, report, exit without cleanup
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            action()
            out = "ok"
        except canopy.CanopyError as e:
            out = f"{e.code}: {e.message}"
        except BaseException as e:  # noqa: BLE001 - reported to the parent as text
            out = f"{type(e).__name__}: {e}"
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


@needs_root
def test_another_users_buffer_is_access_denied(daemon: Daemon, buf: canopy.Buffer) -> None:
    def read() -> None:
        with canopy.connect(daemon.socket) as c:
            c.buffer_fds(buf.id)

    def release() -> None:
        with canopy.connect(daemon.socket) as c:
            c.release_buffer(buf.id)

    def show() -> None:
        with canopy.connect(daemon.socket) as c:
            assert c.show_buffer(buf.id).owner_uid == 0

    assert as_uid(NOBODY, read).startswith(f"ACCESS_DENIED: buffer.fd: buffer {buf.id} belongs to uid 0; uid {NOBODY}")
    assert as_uid(NOBODY, release).startswith("ACCESS_DENIED: ")
    assert as_uid(NOBODY, show) == "ok"


@needs_root
def test_a_non_admin_may_not_shut_down_or_restart(daemon: Daemon) -> None:
    def shutdown() -> None:
        with canopy.connect(daemon.socket) as c:
            c.shutdown()

    def restart() -> None:
        with canopy.connect(daemon.socket) as c:
            c.restart_worker("sub0")

    assert as_uid(NOBODY, shutdown).startswith(f"UNAUTHORIZED: shutdown needs an admin: uid {NOBODY}")
    assert as_uid(NOBODY, restart).startswith("UNAUTHORIZED: ")


@needs_root
def test_a_uid_not_allowed_is_unauthorized(daemon: Daemon) -> None:
    def status() -> None:
        with canopy.connect(daemon.socket) as c:
            c.status()

    assert as_uid(NOBODY - 1, status).startswith(
        f"UNAUTHORIZED: uid {NOBODY - 1} (gid {NOBODY - 1}) may not use this daemon"
    )


def test_connections_closed_for_idleness_are_replaced() -> None:
    d = Daemon(control={"idle_timeout_ms": 100})
    try:
        with canopy.connect(d.socket) as c:
            assert c.submit("sleep_ms", "sub0", canopy.i64(0)).result(timeout=10).ok
            assert c.execute("sleep_ms", "sub0", canopy.i64(0)).ok
            time.sleep(0.5)  # the ordered connection, the wait lane and the pooled connection all close
            assert c.status()["workers"]
            assert c.submit("sleep_ms", "sub0", canopy.i64(0)).result(timeout=10).ok
            assert c.execute("sleep_ms", "sub0", canopy.i64(0)).ok
    finally:
        d.stop()
