"""docs/python.md's examples: every ```python block runs, in order, in one namespace, against a daemon of its
own (the last block shuts it down), and what the blocks print is what the page says they print."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from conftest import ROOT, Daemon

DOC = ROOT / "docs" / "python.md"
GPU_MARK = "# needs a GPU"

# What the examples print, line by line; a pattern for the lines that hold ids.
EXPECTED = [
    r"pytest \['/chip0', '/chip1', '/sub0', '/sub1'\]",
    r"[0-9a-f]{32}\.\d+\.1 posix_shm 4096 rw",
    r"0",
    r"True",
    r"32\.0",
    r"4096",
    r"16",
    r"4096",
    r"96",
    r"completed True 1\.5",
    r"3\.0",
    r"running",
    r"\['completed'\]",
    r"completed",
    r"True",
    r"True",
    r"CANCELLED",
    r"running",
    r"completed True 1500\.0",
    r"UNKNOWN_KERNEL rejected",
    r"UnknownBuffer UNKNOWN_BUFFER",
    r"\[\]",
    r"NO_CONSUMER",
    r"True",
    r"sub1",
]


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_every_python_example_runs_and_prints_what_the_page_says(monkeypatch: pytest.MonkeyPatch) -> None:
    d = Daemon()
    try:
        monkeypatch.setenv("CANOPY_SOCKET", d.socket)
        namespace: dict[str, object] = {}
        out = io.StringIO()
        ran = 0
        for code in blocks():
            if code.startswith(GPU_MARK):
                continue
            with contextlib.redirect_stdout(out):
                exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102 - the page's own examples
            ran += 1
        assert ran >= 8
        lines = out.getvalue().splitlines()
        assert len(lines) == len(EXPECTED), lines
        for line, pattern in zip(lines, EXPECTED, strict=True):
            assert re.fullmatch(pattern, line), (line, pattern)
        assert d.proc.wait(timeout=15) == 0  # the last example shut the daemon down
    finally:
        d.stop()
