"""The client: every request of the control protocol as a method (docs/python.md lists them).

A Client holds one *ordered* connection for its requests: each method sends its request and reads the reply
before it returns, so the daemon sees the program's requests in program order (it infers task dependencies
in that order, and orders buffer transfers and fd hand-overs with tasks). Waiting for tasks never holds it:
futures wait on wait lanes (futures.py), and ``wait`` and ``execute`` on connections of a small pool.

Thread safety: every method may be called from any thread; requests on the ordered connection are
serialized by a lock.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from types import TracebackType
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from ._wire import Connection, close_fds, parse_reply
from .buffer import Buffer, FdGrant
from .errors import BadRequest, Unreachable, error_from_reply
from .futures import GraphFuture, GraphResult, TaskFuture, Waiter, task_error
from .graph import Graph, task_text
from .types import BufferInfo, ModuleInfo, TaskState

DEFAULT_SOCKET = "/run/canopy/canopy.sock"
T = TypeVar("T")
_POOL_KEEP = 4


def _bytes_view(data: Any) -> memoryview:
    """A flat byte view of a bytes-like object (a C-contiguous ndarray included)."""
    view = memoryview(data)
    if not view.c_contiguous:
        raise ValueError("data: expected a C-contiguous bytes-like object")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


class Client:
    """A connection to canopyd. Made by ``canopy.connect``; ``close()`` or ``with`` ends it."""

    def __init__(self, socket: str | os.PathLike[str] | None = None) -> None:
        path = os.fspath(socket) if socket is not None else os.environ.get("CANOPY_SOCKET") or DEFAULT_SOCKET
        self.socket_path: str = path
        self._lock = threading.Lock()
        self._conn: Connection | None = Connection(path)
        self._pool: list[Connection] = []
        self._pool_lock = threading.Lock()
        self._waiter = Waiter(path)
        self.closed = False

    # -- lifetime -----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Closes every connection; futures still waiting fail with Unreachable."""
        self.closed = True
        self._waiter.close()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        with self._pool_lock:
            pool, self._pool = self._pool, []
        for conn in pool:
            conn.close()

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            self.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the ordered connection ---------------------------------------------------------------------------

    def _ordered(self) -> Connection:
        """The ordered connection, reconnected when the daemon closed the last one (REQUIRES: self._lock)."""
        if self.closed:
            raise Unreachable("the client is closed")
        if self._conn is None or not self._conn.usable():
            self._conn = Connection(self.socket_path)
        return self._conn

    def _retrying(self, call: Callable[[Connection], T]) -> T:
        """Runs ``call`` on the ordered connection (REQUIRES: self._lock). When a connection that had served
        requests before turns out closed, and no byte of a reply came, the daemon closed it before it read
        this request (it closes idle connections, and a connection whose stream it cannot trust after an
        earlier reply): ``call`` runs once more, on a new connection."""
        for attempt in (1, 2):
            conn = self._ordered()
            reused, before = conn.sent > 0, conn.received
            try:
                return call(conn)
            except Unreachable:
                if attempt == 2 or not reused or conn.received != before or self.closed:
                    raise
                conn.close()
        raise AssertionError("unreachable")

    def _exchange(
        self, body: bytes, what: str, attachment: Any = None, sink: Callable[[int], memoryview] | None = None
    ) -> tuple[dict[str, Any], list[int], int]:
        """Sends one request on the ordered connection and reads its reply (raising its error), its fds and,
        with ``sink``, the attachment that follows it, into ``sink(N)``. Returns (reply, fds, N)."""

        def exchange(conn: Connection) -> tuple[dict[str, Any], list[int], int]:
            try:
                conn.send(body, attachment, what)
            except Unreachable as send_error:
                # The daemon may have answered before it closed (an attachment over its limit): read that.
                try:
                    reply, fds = conn.receive(f"the reply to {what}")
                except Unreachable:
                    raise send_error from None
                finally:
                    conn.close()
                close_fds(fds)
                raise (error_from_reply(reply) if not reply.get("ok", False) else send_error) from None
            reply, fds = conn.receive(f"the reply to {what}")
            n = 0
            if reply.get("ok", False) and "attachment" in reply:
                n = int(reply["attachment"])
                into = sink(n) if sink is not None else None
                if into is None or n > len(into):
                    conn.discard_attachment(n)
                    close_fds(fds)
                    expected = 0 if into is None else len(into)
                    raise BadRequest(f"{what}: the reply carries {n} attached bytes; at most {expected} expected")
                conn.receive_attachment(into[:n])
            return reply, fds, n

        with self._lock:
            reply, fds, n = self._retrying(exchange)
        if not reply.get("ok", False):
            close_fds(fds)
            raise error_from_reply(reply)
        return reply, fds, n

    def request(self, op: str, **args: Any) -> dict[str, Any]:
        """Sends any request (``{"op": op, **args}``) and returns its reply; raises its typed error."""
        body = json.dumps({"op": op, **args}, separators=(",", ":")).encode()
        reply, fds, _ = self._exchange(body, op)
        close_fds(fds)
        return reply

    # -- pooled connections, for requests that wait in the server -----------------------------------------

    def _pool_take(self) -> Connection:
        with self._pool_lock:
            conn = self._pool.pop() if self._pool else None
        if conn is not None and conn.usable():
            return conn
        if self.closed:
            raise Unreachable("the client is closed")
        return Connection(self.socket_path)

    def _pool_give(self, conn: Connection) -> None:
        with self._pool_lock:
            if len(self._pool) < _POOL_KEEP and not self.closed:
                self._pool.append(conn)
                return
        conn.close()

    def _pooled(self, body: bytes, what: str) -> dict[str, Any]:
        for attempt in (1, 2):
            conn = self._pool_take()
            reused, before = conn.sent > 0, conn.received
            try:
                conn.send(body, None, what)
                reply, fds = conn.receive(f"the reply to {what}")
            except Unreachable:
                conn.close()
                # As in _retrying: a reused connection the daemon closed before it read this request.
                if attempt == 2 or not reused or conn.received != before:
                    raise
                continue
            except BaseException:
                conn.close()
                raise
            close_fds(fds)
            self._pool_give(conn)
            return reply
        raise AssertionError("unreachable")

    # -- status and workers -------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """``status``: ``{"node": {"name", "level"}, "pid", "uptime_s", "workers": [...]}``."""
        reply = self.request("status")
        reply.pop("ok", None)
        return reply

    def restart_worker(self, worker: str) -> str:
        """``worker.restart`` (admins only); returns the worker's path once the restart is under way."""
        return str(self.request("worker.restart", worker=worker)["worker"])

    # -- buffers ------------------------------------------------------------------------------------------

    def create_buffer(
        self,
        nbytes: int,
        backend: str = "shm",
        on: str | None = None,
        world: Sequence[str] | None = None,
        access: str = "rw",
    ) -> Buffer:
        """``buffer.create``: ``backend`` ``shm`` | ``vmm`` | ``symmetric``; ``on`` the supervisor (shm) or
        chip (vmm) that makes it; ``world`` the chips of a symmetric buffer; ``access`` ``r`` | ``w`` | ``rw``
        (the grant for tasks)."""
        args: dict[str, Any] = {"bytes": nbytes, "backend": backend, "access": access}
        if on is not None:
            args["on"] = on
        if world is not None:
            args["world"] = list(world)
        return Buffer(self, BufferInfo.from_json(self.request("buffer.create", **args)["buffer"]))

    def buffer(self, buffer_id: str) -> Buffer:
        """A Buffer object for an existing buffer id (or preloaded arena name), checked with ``buffer.show``."""
        return Buffer(self, self.show_buffer(buffer_id))

    def list_buffers(self) -> list[BufferInfo]:
        """``buffer.list``: every buffer of the daemon."""
        return [BufferInfo.from_json(b) for b in self.request("buffer.list")["buffers"]]

    def show_buffer(self, buffer_id: str) -> BufferInfo:
        """``buffer.show``."""
        return BufferInfo.from_json(self.request("buffer.show", buffer=buffer_id)["buffer"])

    def release_buffer(self, buffer_id: str) -> str | None:
        """``buffer.release``; returns the daemon's warning when the unlink failed (the release still holds)."""
        warning = self.request("buffer.release", buffer=buffer_id).get("warning")
        return None if warning is None else str(warning)

    def write_buffer(self, buffer_id: str, data: Any, offset: int = 0) -> int:
        """``buffer.write`` with the bytes as a binary attachment; returns the count written."""
        view = _bytes_view(data)
        head = {"op": "buffer.write", "buffer": buffer_id, "offset": offset, "attachment": len(view)}
        body = json.dumps(head, separators=(",", ":")).encode()
        reply, fds, _ = self._exchange(body, "buffer.write", attachment=view)
        close_fds(fds)
        return int(reply.get("written", len(view)))

    def read_buffer(self, buffer_id: str, nbytes: int | None = None, offset: int = 0) -> bytearray:
        """``buffer.read`` with an attachment: ``nbytes`` (default: to the end) from ``offset``. A read past
        the end returns the bytes there are."""
        out: list[bytearray] = []

        def sink(n: int) -> memoryview:
            out.append(bytearray(n))
            return memoryview(out[0])

        self._read(buffer_id, nbytes, offset, sink)
        return out[0] if out else bytearray()

    def read_buffer_into(self, buffer_id: str, out: Any, offset: int = 0) -> int:
        """``buffer.read`` of len(out) bytes from ``offset`` straight into a writable bytes-like object;
        returns the count read (fewer past the end of the buffer)."""
        view = _bytes_view(out)
        if view.readonly:
            raise ValueError("out: expected a writable bytes-like object")
        return self._read(buffer_id, len(view), offset, lambda n: view)

    def _read(self, buffer_id: str, nbytes: int | None, offset: int, sink: Callable[[int], memoryview]) -> int:
        head: dict[str, Any] = {"op": "buffer.read", "buffer": buffer_id, "offset": offset, "attachment": True}
        if nbytes is not None:
            head["bytes"] = nbytes
        body = json.dumps(head, separators=(",", ":")).encode()
        _, fds, n = self._exchange(body, "buffer.read", sink=sink)
        close_fds(fds)
        return n

    def buffer_fds(self, buffer_id: str, access: str = "readwrite") -> FdGrant:
        """``buffer.fd``: the buffer's file descriptors (``access`` ``read`` | ``readwrite``); the caller
        closes them (``FdGrant.close`` or ``with``). Ordered after earlier tasks that write the buffer."""
        body = json.dumps({"op": "buffer.fd", "buffer": buffer_id, "access": access}).encode()
        reply, fds, _ = self._exchange(body, "buffer.fd")
        expected = int(reply.get("fds", len(fds)))
        if len(fds) != expected:
            close_fds(fds)
            raise Unreachable(f"buffer.fd: the reply says {expected} fds, {len(fds)} arrived")
        return FdGrant(BufferInfo.from_json(reply["buffer"]), int(reply["bytes"]), bool(reply["writable"]), fds)

    # -- tasks --------------------------------------------------------------------------------------------

    def _accept(self, body: str, what: str) -> bytes:
        """Sends submit or run without waiting in the server; returns the reply's body, errors included."""
        data = body.encode()

        def accept(conn: Connection) -> tuple[bytes, list[int]]:
            conn.send(data, None, what)
            return conn.receive_raw(f"the reply to {what}")

        with self._lock:
            reply, fds = self._retrying(accept)
        close_fds(fds)
        return reply

    def submit(
        self,
        kernel: str,
        on: str,
        *args: Any,
        launch: Mapping[str, Any] | None = None,
        name: str | None = None,
        params: Sequence[str] | None = None,
    ) -> TaskFuture:
        """``submit``: runs ``kernel`` on worker ``on`` with tagged tensors and scalars; returns a future of
        its final TaskState. A rejected or failed task's future raises its typed error."""
        text = '{"op":"submit","task":' + task_text(name, kernel, on, args, launch, params) + "}"
        reply = parse_reply(self._accept(text, "submit"), "the reply to submit")
        if not reply.get("ok", False):
            state = TaskState.from_json(reply["task"]) if isinstance(reply.get("task"), dict) else None
            future = TaskFuture(self, state or TaskState(0, name or kernel, kernel, on, "rejected"))
            future.set_exception(error_from_reply(reply, state))
            return future
        future = TaskFuture(self, TaskState.from_json(reply["task"]))
        self._waiter.track_task(future)
        return future

    def run(self, graph: Graph | Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> GraphFuture:
        """``run``: submits a graph whole (a Graph, a ``{"tasks": [...]}`` dict or a list of task dicts);
        returns a future of its GraphResult. A graph with a rejected task runs no task."""
        if isinstance(graph, Graph):
            text, count = graph.text(), len(graph)
        else:
            tasks = list(graph["tasks"]) if isinstance(graph, Mapping) else list(graph)
            text, count = json.dumps({"tasks": tasks}, separators=(",", ":")), len(tasks)
        body = self._accept('{"op":"run","graph":' + text + "}", "run")
        accepted = GraphResult.from_body(body, count)
        if accepted is None:
            reply = parse_reply(body, "the reply to run")
            if not reply.get("ok", False):
                raise error_from_reply(reply)
            accepted = GraphResult(raw=reply["tasks"])
        future = GraphFuture(self, accepted)
        self._waiter.track_graph(future)
        return future

    def execute(
        self,
        kernel: str,
        on: str,
        *args: Any,
        launch: Mapping[str, Any] | None = None,
        name: str | None = None,
        params: Sequence[str] | None = None,
    ) -> TaskState:
        """``submit`` with ``"wait": true``: one round trip, returns the completed TaskState or raises the
        task's error. Blocks this thread only (it uses a connection of its own)."""
        text = '{"op":"submit","wait":true,"task":' + task_text(name, kernel, on, args, launch, params) + "}"
        reply = self._pooled(text.encode(), "submit")
        task = reply.get("task")
        state = TaskState.from_json(task) if isinstance(task, dict) else None
        if not reply.get("ok", False):
            raise error_from_reply(reply, state)
        assert state is not None
        if state.state != "completed":
            raise task_error(state)
        return state

    def wait(self, task_ids: int | Sequence[int], timeout_ms: int | None = None) -> list[TaskState]:
        """``wait``: blocks until every task named has finished (or ``timeout_ms`` passed) and returns their
        states in the order given, failed ones included."""
        ids = [task_ids] if isinstance(task_ids, int) else list(task_ids)
        body: dict[str, Any] = {"op": "wait", "task_ids": ids}
        if timeout_ms is not None:
            body["timeout_ms"] = timeout_ms
        reply = self._pooled(json.dumps(body, separators=(",", ":")).encode(), "wait")
        if not reply.get("ok", False):
            raise error_from_reply(reply)
        return [TaskState.from_json(t) for t in reply["tasks"]]

    def cancel(self, *task_ids: int) -> list[TaskState]:
        """``cancel``: each state carries ``cancel`` = ``cancelled`` | ``running`` | ``finished``."""
        return [TaskState.from_json(t) for t in self.request("cancel", task_ids=list(task_ids))["tasks"]]

    def tasks(self) -> list[TaskState]:
        """``tasks``: unfinished tasks and the most recent finished ones, oldest first."""
        return [TaskState.from_json(t) for t in self.request("tasks")["tasks"]]

    # -- modules, metrics, shutdown -----------------------------------------------------------------------

    def load_module(self, name: str, image: bytes | str | os.PathLike[str], format: str | None = None) -> ModuleInfo:
        """``module.load`` (admins only): a PTX, cubin or fatbin image, given as bytes or a file path."""
        data = image if isinstance(image, bytes) else open(os.fspath(image), "rb").read()
        args: dict[str, Any] = {"name": name, "data": base64.b64encode(data).decode()}
        if format is not None:
            args["format"] = format
        return ModuleInfo.from_json(self.request("module.load", **args)["module"])

    def list_modules(self) -> list[ModuleInfo]:
        """``module.list``."""
        return [ModuleInfo.from_json(m) for m in self.request("module.list")["modules"]]

    def metrics(self) -> str:
        """``metrics``: the Prometheus text."""
        return str(self.request("metrics")["text"])

    def shutdown(self) -> None:
        """``shutdown`` (admins only): the daemon drains and stops."""
        self.request("shutdown")


def connect(socket: str | os.PathLike[str] | None = None) -> Client:
    """Connects to canopyd at ``socket``, else ``$CANOPY_SOCKET``, else /run/canopy/canopy.sock.

    Raises ``canopy.Unreachable`` when nothing answers there.
    """
    return Client(socket)
