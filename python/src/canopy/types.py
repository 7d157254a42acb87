"""Typed records of the daemon's replies: tasks, buffers, modules.

Each keeps the reply's JSON object in ``raw``, so fields this package does not name are still at hand.
Instances are immutable and safe to share between threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

FINAL_STATES = frozenset(("completed", "failed", "rejected"))


@dataclass(frozen=True)
class ErrorInfo:
    """The ``{"code", "message"}`` of a failed or rejected task."""

    code: str
    message: str


@dataclass(frozen=True)
class TaskState:
    """A TASKSTATE of the control protocol.

    ``state`` is ``queued``, ``running``, ``completed``, ``failed`` or ``rejected``; ``error`` is set when
    failed or rejected; times are CLOCK_MONOTONIC nanoseconds (``start_ns``/``end_ns`` are the worker's and
    0 until it ran). ``cancel`` is set only in the reply to a cancel request.
    """

    id: int
    name: str
    kernel: str
    on: str
    state: str
    error: ErrorInfo | None = None
    submitted_ns: int = 0
    start_ns: int = 0
    end_ns: int = 0
    cancel: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def done(self) -> bool:
        """Whether the task has finished (completed, failed or rejected)."""
        return self.state in FINAL_STATES

    @property
    def ok(self) -> bool:
        return self.state == "completed"

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TaskState:
        err = obj.get("error")
        return cls(
            id=int(obj.get("id", 0)),
            name=str(obj.get("name", "")),
            kernel=str(obj.get("kernel", "")),
            on=str(obj.get("on", "")),
            state=str(obj.get("state", "")),
            error=ErrorInfo(str(err.get("code", "")), str(err.get("message", ""))) if isinstance(err, dict) else None,
            submitted_ns=int(obj.get("submitted_ns", 0)),
            start_ns=int(obj.get("start_ns", 0)),
            end_ns=int(obj.get("end_ns", 0)),
            cancel=obj.get("cancel"),
            raw=obj,
        )


@dataclass(frozen=True)
class BufferInfo:
    """A BUFFER of the control protocol (``buffer.create``, ``buffer.list``, ``buffer.show``).

    ``backend`` is ``posix_shm``, ``sim_vmm``, ``cuda_vmm``, ``fork_shm`` or ``fork_cow``; ``access`` the
    grant for tasks (``r``, ``w``, ``rw``); ``world`` the chips of a symmetric buffer in rank order;
    ``owner_uid`` None for the daemon's own buffers.
    """

    id: str
    backend: str
    nbytes: int
    access: str
    device: int = 0
    world: tuple[str, ...] = ()
    name: str = ""
    creator: str = ""
    owner_uid: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BufferInfo:
        owner = obj.get("owner_uid")
        return cls(
            id=str(obj["id"]),
            backend=str(obj.get("backend", "")),
            nbytes=int(obj.get("nbytes", 0)),
            access=str(obj.get("access", "")),
            device=int(obj.get("device", 0) or 0),
            world=tuple(str(w) for w in obj.get("world", []) or []),
            name=str(obj.get("name", "") or ""),
            creator=str(obj.get("creator", "") or ""),
            owner_uid=None if owner is None else int(owner),
            raw=obj,
        )


@dataclass(frozen=True)
class ModuleInfo:
    """A MODULE of the control protocol: a user module loaded into the cuda chips."""

    name: str
    bytes: int
    format: str
    chips: tuple[str, ...]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ModuleInfo:
        return cls(
            name=str(obj.get("name", "")),
            bytes=int(obj.get("bytes", 0)),
            format=str(obj.get("format", "")),
            chips=tuple(str(c) for c in obj.get("chips", []) or []),
            raw=obj,
        )
