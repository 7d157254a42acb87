"""Exceptions: one class per error code of the control protocol, and Unreachable for the socket itself.

Every failure the daemon reports is a ``CanopyError`` whose class names its code (``UnknownBuffer`` for
``UNKNOWN_BUFFER``) and whose ``.code`` and ``.message`` are the reply's. A task that failed or was rejected
raises the class of its error from its future, with the task's state in ``.task``.
"""

from __future__ import annotations

import concurrent.futures
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from .types import TaskState


class CanopyError(Exception):
    """A failure reported by canopyd (or, for Unreachable, the lack of one).

    ``code`` is the protocol's error code (``"UNKNOWN_BUFFER"``), ``message`` the daemon's text, and ``task``
    the state of the task that failed, when a task did.
    """

    code: str = ""

    def __init__(self, message: str, code: str | None = None, task: TaskState | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.task = task
        self.tasks: Any = None  # a graph's GraphResult, when a graph failed

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.code else self.message


class InvalidTensor(CanopyError):
    code = "INVALID_TENSOR"


class InvalidDescriptor(CanopyError):
    code = "INVALID_DESCRIPTOR"


class UnknownBuffer(CanopyError):
    code = "UNKNOWN_BUFFER"


class StaleBuffer(CanopyError):
    code = "STALE_BUFFER"


class AccessDenied(CanopyError):
    code = "ACCESS_DENIED"


class OverlappingWrites(CanopyError):
    code = "OVERLAPPING_WRITES"


class UnreachableBuffer(CanopyError):
    code = "UNREACHABLE_BUFFER"


class PeOutOfRange(CanopyError):
    code = "PE_OUT_OF_RANGE"


class UnknownKernel(CanopyError):
    code = "UNKNOWN_KERNEL"


class UnknownWorker(CanopyError):
    code = "UNKNOWN_WORKER"


class NoConsumer(CanopyError):
    code = "NO_CONSUMER"


class WorkerDied(CanopyError):
    code = "WORKER_DIED"


class KernelFailed(CanopyError):
    code = "KERNEL_FAILED"


class Timeout(CanopyError):
    code = "TIMEOUT"


class DependencyFailed(CanopyError):
    code = "DEPENDENCY_FAILED"


class BadRequest(CanopyError):
    code = "BAD_REQUEST"


class Unauthorized(CanopyError):
    code = "UNAUTHORIZED"


class Cancelled(CanopyError, concurrent.futures.CancelledError):
    """A task cancelled by a ``cancel`` request; also a ``concurrent.futures.CancelledError``."""

    code = "CANCELLED"


class Unreachable(CanopyError, ConnectionError):
    """The daemon cannot be reached: no socket, connection refused, or the connection closed mid-request.

    Its ``code`` is ``"UNREACHABLE"``, which is no code of the protocol: the daemon never sent one.
    """

    code = "UNREACHABLE"

    def __init__(self, message: str) -> None:
        CanopyError.__init__(self, message)


ERRORS: dict[str, type[CanopyError]] = {
    cls.code: cls
    for cls in (
        InvalidTensor,
        InvalidDescriptor,
        UnknownBuffer,
        StaleBuffer,
        AccessDenied,
        OverlappingWrites,
        UnreachableBuffer,
        PeOutOfRange,
        UnknownKernel,
        UnknownWorker,
        NoConsumer,
        WorkerDied,
        KernelFailed,
        Timeout,
        DependencyFailed,
        BadRequest,
        Unauthorized,
        Cancelled,
    )
}


def error_for(code: str, message: str, task: TaskState | None = None) -> CanopyError:
    """The exception for a code and message; a code this package does not know gives a plain CanopyError."""
    cls = ERRORS.get(code)
    if cls is None:
        return CanopyError(message, code=code, task=task)
    return cls(message, task=task)


def error_from_reply(reply: Mapping[str, Any], task: TaskState | None = None) -> CanopyError:
    """The exception for an ``{"ok": false, "error": {...}}`` reply."""
    error = reply.get("error")
    if not isinstance(error, dict):
        return BadRequest(f"canopyd replied ok=false without an error object: {reply!r}")
    return error_for(str(error.get("code", "")), str(error.get("message", "")), task)
