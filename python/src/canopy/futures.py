"""Futures of tasks and graphs, and the connections that wait for them.

``submit`` and ``run`` send their request on the client's ordered connection without waiting in the
server, so requests keep the order the program made them in (the daemon infers dependencies in that
order), and the task ids are known at once. The wait for completion then goes out on a *wait lane*: a
connection of its own with a reader thread that resolves futures as replies arrive. Replies on one
connection come in request order, so a wait for a long task would hold up the futures queued behind it on
its lane: each wait goes to an idle lane, and a client opens up to ``MAX_LANES`` of them before it queues.

Callbacks added with ``add_done_callback`` run on a lane's reader thread; they must not block on another
future of the same client.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, overload

from . import _scan
from ._wire import Connection, close_fds, parse_reply
from .errors import CanopyError, Unreachable, error_for, error_from_reply
from .types import FINAL_STATES, TaskState

if TYPE_CHECKING:
    from .client import Client

MAX_LANES = 4
MAX_WAIT_IDS = 100_000  # the daemon's limit on the ids of one wait request

# A rejected graph reports its other tasks with this message prefix (docs/control-protocol.md, "run").
_NOT_RUN = "not run: "

# Called with a reply's unparsed body, or with the exception that ended the wait.
Callback = Callable[["bytes | None", "BaseException | None"], None]


def task_error(state: TaskState) -> CanopyError:
    """The exception of a failed or rejected task."""
    err = state.error
    if err is None:
        return error_for("KERNEL_FAILED", f"task {state.name} ({state.id}) ended {state.state} without an error")
    return error_for(err.code, err.message, state)


class TaskFuture(Future):  # type: ignore[type-arg]
    """The future of one submitted task: ``result()`` is its final TaskState, or raises its typed error.

    ``task_id`` and ``accepted`` (the state when the daemon took it) are known at once. ``cancel()`` asks
    the daemon to cancel the task: it returns True when the task was still queued, and ``result()`` then
    raises ``canopy.Cancelled`` (a ``concurrent.futures.CancelledError``).
    """

    def __init__(self, client: Client | None, accepted: TaskState) -> None:
        super().__init__()
        self.set_running_or_notify_cancel()
        self._client = client
        self.accepted = accepted
        self.task_id = accepted.id

    def cancel(self) -> bool:
        if self.done() or self._client is None:
            return False
        states = self._client.cancel(self.task_id)
        return bool(states) and states[0].cancel == "cancelled"

    def _finish(self, obj: dict[str, Any] | None, exc: BaseException | None) -> None:
        if exc is not None or obj is None:
            self.set_exception(exc or Unreachable("a wait ended without a reply"))
            return
        if not obj.get("ok", False):
            self.set_exception(error_from_reply(obj))
            return
        self._settle(TaskState.from_json(obj["task"]))

    def _settle(self, state: TaskState) -> None:
        if state.state == "completed":
            self.set_result(state)
        else:
            self.set_exception(task_error(state))


class GraphResult(Sequence[TaskState]):
    """The states of a graph's tasks, in graph order; ``result["name"]`` finds one by name.

    Made from a reply's JSON objects or from its unparsed body with the ids read off it (_scan.py); the
    body is parsed, and each TaskState built, on first access, so a large graph's result costs little until
    it is read.
    """

    def __init__(
        self, raw: list[dict[str, Any]] | None = None, body: bytes | None = None, ids: list[int] | None = None
    ) -> None:
        self._raw = raw
        self._body = body
        self._ids = ids
        n = len(raw) if raw is not None else len(ids or ())
        self._states: list[TaskState | None] = [None] * n
        self._by_name: dict[str, int] | None = None

    @classmethod
    def from_body(cls, body: bytes, count: int) -> GraphResult | None:
        """A result over an unparsed ``{"ok":true,"tasks":[...]...}`` body of ``count`` tasks; None if the
        body is not one (the caller parses it)."""
        ids = _scan.task_ids(body, count)
        return None if ids is None else cls(body=body, ids=ids)

    @property
    def raw(self) -> list[dict[str, Any]]:
        """The TASKSTATE objects as the daemon sent them."""
        if self._raw is None:
            assert self._body is not None
            self._raw = json.loads(self._body)["tasks"]
            self._body = None
        return self._raw

    def __len__(self) -> int:
        return len(self._states)

    @overload
    def __getitem__(self, key: int | str) -> TaskState: ...

    @overload
    def __getitem__(self, key: slice) -> list[TaskState]: ...

    def __getitem__(self, key: int | str | slice) -> TaskState | list[TaskState]:
        if isinstance(key, slice):
            return [self[i] for i in range(*key.indices(len(self)))]
        if isinstance(key, str):
            if self._by_name is None:
                self._by_name = {str(s.get("name")): i for i, s in enumerate(self.raw)}
            key = self._by_name[key]
        state = self._states[key]
        if state is None:
            state = self._states[key] = TaskState.from_json(self.raw[key])
        return state

    def __iter__(self) -> Iterator[TaskState]:
        return (self[i] for i in range(len(self)))

    @property
    def ids(self) -> list[int]:
        if self._ids is None:
            self._ids = [int(s["id"]) for s in self.raw]
        return self._ids

    def count(self, state: str) -> int:
        """How many tasks are in ``state`` (``queued``, ``running``, ``completed``, ``failed``, ``rejected``)."""
        if self._raw is None and self._body is not None:
            return _scan.count_state(self._body, state)
        return sum(1 for s in self.raw if s.get("state") == state)

    def has(self, state: str) -> bool:
        """Whether any task is in ``state``."""
        if self._raw is None and self._body is not None:
            return _scan.has_state(self._body, state)
        return any(s.get("state") == state for s in self.raw)

    @property
    def ok(self) -> bool:
        return self.count("completed") == len(self)

    def failed(self) -> list[TaskState]:
        """The tasks that failed or were rejected, in graph order."""
        return [self[i] for i, s in enumerate(self.raw) if s.get("state") != "completed"]


def graph_error(result: GraphResult) -> CanopyError:
    """The exception of a graph that did not complete: the error of its first task that failed of its own
    accord (not DEPENDENCY_FAILED, not a task left unrun because another was rejected), with ``tasks``."""
    failed = result.failed()
    ranked = sorted(
        failed,
        key=lambda s: (
            s.error is not None and s.error.code == "DEPENDENCY_FAILED",
            s.state == "rejected" and s.error is not None and s.error.message.startswith(_NOT_RUN),
        ),
    )
    exc = task_error(ranked[0])
    exc.tasks = result
    return exc


class GraphFuture(Future):  # type: ignore[type-arg]
    """The future of a graph: ``result()`` is a GraphResult once every task completed, or raises the error
    of the task that failed first of its own accord, with every task's final state in ``.tasks``.

    ``task_ids`` and ``accepted`` (the states when the daemon took the graph) are known at once.
    ``cancel()`` cancels every task of the graph that is still queued.
    """

    def __init__(self, client: Client | None, accepted: GraphResult) -> None:
        super().__init__()
        self.set_running_or_notify_cancel()
        self._client = client
        self.accepted = accepted
        self.task_ids = accepted.ids
        self._chunks: list[GraphResult | None] = []
        self._lock = threading.Lock()

    def cancel(self) -> bool:
        if self.done() or self._client is None:
            return False
        states = self._client.cancel(*self.task_ids)
        return any(s.cancel == "cancelled" for s in states)

    def _chunk_done(self, index: int, count: int, body: bytes | None, exc: BaseException | None) -> None:
        chunk = None
        if exc is None and body is not None:
            chunk = GraphResult.from_body(body, count)
            if chunk is None:
                try:
                    reply = parse_reply(body, "the reply to a wait")
                    if reply.get("ok", False):
                        chunk = GraphResult(raw=reply["tasks"])
                    else:
                        exc = error_from_reply(reply)
                except Unreachable as e:
                    exc = e
        with self._lock:
            if self.done():
                return
            if exc is not None or chunk is None:
                self.set_exception(exc or Unreachable("a wait ended without a reply"))
                return
            self._chunks[index] = chunk
            if any(c is None for c in self._chunks):
                return
        if len(self._chunks) == 1:
            result = self._chunks[0]
        else:
            result = GraphResult(raw=[s for c in self._chunks for s in c.raw])  # type: ignore[union-attr]
        assert result is not None
        self._settle(result)

    def _settle(self, result: GraphResult) -> None:
        if result.ok:
            self.set_result(result)
        else:
            self.set_exception(graph_error(result))


class _Lane:
    """One wait connection and its reader thread. Replies resolve the callbacks in request order."""

    def __init__(self, path: str, on_dead: Callable[[_Lane], None]) -> None:
        self.conn = Connection(path)
        self.pending: deque[Callback] = deque()
        self.lock = threading.Lock()
        self.dead: BaseException | None = None
        self._on_dead = on_dead
        self.thread = threading.Thread(target=self._read_loop, name="canopy-wait-lane", daemon=True)
        self.thread.start()

    def send(self, body: bytes, callback: Callback) -> None:
        with self.lock:
            if self.dead is not None:
                raise Unreachable(f"wait connection is closed: {self.dead}")
            self.pending.append(callback)
            try:
                self.conn.send(body, None, "a wait request")
            except Unreachable as e:
                self.pending.pop()
                self.dead = e
                failed = e
            else:
                return
        self._on_dead(self)  # no further wait goes to this lane; its reader ends on the closed connection
        raise failed

    def _read_loop(self) -> None:
        while True:
            try:
                body, fds = self.conn.receive_raw("the reply to a wait")
            except Unreachable as e:
                self._fail(e)
                return
            close_fds(fds)
            with self.lock:
                callback = self.pending.popleft() if self.pending else None
            if callback is not None:
                try:
                    callback(body, None)
                except Exception:  # a future's own bookkeeping never stops the lane
                    pass

    def _fail(self, exc: BaseException) -> None:
        with self.lock:
            self.dead = exc
            pending, self.pending = list(self.pending), deque()
        self._on_dead(self)
        for callback in pending:
            try:
                callback(None, exc)
            except Exception:
                pass

    def close(self) -> None:
        self.conn.shutdown()


def _chunk_callback(future: GraphFuture, index: int, count: int) -> Callback:
    return lambda body, exc: future._chunk_done(index, count, body, exc)


class Waiter:
    """Sends ``wait`` requests on up to MAX_LANES lanes, each to an idle lane when there is one."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lanes: list[_Lane] = []
        self._lock = threading.Lock()
        self._closed = False

    def _lane(self) -> _Lane:
        with self._lock:
            if self._closed:
                raise Unreachable("the client is closed")
            for lane in self._lanes:
                if not lane.pending:
                    return lane
            if len(self._lanes) < MAX_LANES:
                lane = _Lane(self.path, self._forget)
                self._lanes.append(lane)
                return lane
            return min(self._lanes, key=lambda lane: len(lane.pending))

    def _forget(self, lane: _Lane) -> None:
        with self._lock:
            if lane in self._lanes:
                self._lanes.remove(lane)

    def wait(self, ids: list[int], callback: Callback, timeout_ms: int | None = None, again: bool = True) -> None:
        """Sends one wait for ``ids`` (at most MAX_WAIT_IDS); ``callback(reply, None)`` or ``(None, exc)``.

        A wait whose lane closes before its reply (the daemon closes idle connections) is sent once more on
        another lane; waiting is idempotent. A daemon that is gone fails the second one too."""
        body = '{"op":"wait","task_ids":[' + ",".join(map(str, ids)) + "]"
        if timeout_ms is not None:
            body += ',"timeout_ms":' + str(int(timeout_ms))
        data = (body + "}").encode()

        def on_reply(reply: bytes | None, exc: BaseException | None) -> None:
            if exc is not None and again and not self._closed:
                self.wait(ids, callback, timeout_ms, again=False)
            else:
                callback(reply, exc)

        for attempt in (1, 2):
            try:
                self._lane().send(data, on_reply)
                return
            except Unreachable as e:
                if attempt == 2 or self._closed:
                    callback(None, e)

    def track_task(self, future: TaskFuture) -> None:
        if future.accepted.state in FINAL_STATES:
            future._settle(future.accepted)
            return

        def done(body: bytes | None, exc: BaseException | None) -> None:
            obj = None
            if body is not None:
                try:
                    obj = parse_reply(body, "the reply to a wait")
                    if obj.get("ok", False):
                        obj = {"ok": True, "task": obj["tasks"][0]}
                except Unreachable as e:
                    obj, exc = None, e
            future._finish(obj, exc)

        self.wait([future.task_id], done)

    def track_graph(self, future: GraphFuture) -> None:
        accepted = future.accepted
        if not accepted.has("queued") and not accepted.has("running"):
            future._settle(accepted)  # rejected, or finished before the reply was written
            return
        ids = future.task_ids
        starts = range(0, len(ids), MAX_WAIT_IDS)
        future._chunks = [None] * len(starts)
        for index, start in enumerate(starts):
            chunk = ids[start : start + MAX_WAIT_IDS]
            self.wait(chunk, _chunk_callback(future, index, len(chunk)))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            lanes = list(self._lanes)
        for lane in lanes:
            lane.close()
