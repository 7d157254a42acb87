"""Graphs of tasks: ``g = canopy.Graph(); g.task("init", "fill", on="chip0", args=[canopy.Out(t), 1.5])``.

A graph is submitted whole with ``Client.run(g)``: the daemon checks every task before it queues any and
infers the dependencies from the views each task touches. Each task is encoded to its JSON text when it is
added, from arguments that are already text, so building and sending a graph of 10 000 tasks takes a few
milliseconds of Python. Not thread-safe: build a graph from one thread.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring
from typing import Any, Iterable, Mapping, Sequence

from .tensor import Arg, arg_text

# The encoded "kernel" and "on" members of recent (kernel, worker) pairs: most graphs use a handful.
_heads: dict[tuple[str, str], str] = {}


def _launch_text(launch: Mapping[str, Any]) -> str:
    return json.dumps(dict(launch), separators=(",", ":"))


def task_text(
    name: str | None,
    kernel: str,
    on: str,
    args: Iterable[Any],
    launch: Mapping[str, Any] | None = None,
    params: Sequence[str] | None = None,
) -> str:
    """One TASK object of the control protocol as JSON text."""
    head = _heads.get((kernel, on))
    if head is None:
        head = '"kernel":' + encode_basestring(kernel) + ',"on":' + encode_basestring(on) + ',"args":['
        if len(_heads) < 4096:
            _heads[(kernel, on)] = head
    text = "{" + head if name is None else '{"name":' + encode_basestring(name) + "," + head
    text += ",".join([a.text if a.__class__ is Arg else arg_text(a, i) for i, a in enumerate(args)]) + "]"
    if launch is not None:
        text += ',"launch":' + _launch_text(launch)
    if params is not None:
        text += ',"params":' + json.dumps(list(params), separators=(",", ":"))
    return text + "}"


class Graph:
    """An ordered list of named tasks, submitted whole by ``Client.run``."""

    def __init__(self) -> None:
        self._tasks: list[str] = []

    def task(
        self,
        name: str | None,
        kernel: str,
        on: str,
        args: Iterable[Any] = (),
        launch: Mapping[str, Any] | None = None,
        params: Sequence[str] | None = None,
    ) -> str:
        """Adds a task and returns its name (``t<index>`` when ``name`` is None).

        ``args``: tagged tensors (``In``, ``Out``, ``InOut``) and scalars (``f32``, ``f64``, ``i64``, or a
        plain int or float). ``launch``: ``{"grid", "block", "shared_bytes"}`` or ``{"tf32": True}``;
        ``params``: a module kernel's parameter kinds. Names must be unique within the graph (the daemon
        rejects the graph otherwise).
        """
        if name is None:
            name = f"t{len(self._tasks)}"
        self._tasks.append(task_text(name, kernel, on, args, launch, params))
        return name

    def __len__(self) -> int:
        return len(self._tasks)

    def text(self) -> str:
        """The graph as the control protocol's ``{"tasks": [...]}`` JSON text."""
        return '{"tasks":[' + ",".join(self._tasks) + "]}"

    def json(self) -> dict[str, Any]:
        return json.loads(self.text())  # type: ignore[no-any-return]
