"""Graphs: the builder, run, GraphResult, and how a failed or rejected graph raises."""

from __future__ import annotations

import time

import numpy as np
import pytest

import canopy


def test_graph_builder_encodes_the_protocols_tasks(buf: canopy.Buffer) -> None:
    g = canopy.Graph()
    t = buf.tensor("float32", 4)
    assert g.task("init", "fill", on="chip0", args=[canopy.Out(t), canopy.f32(1.5)]) == "init"
    assert g.task(None, "sleep_ms", "sub0", [canopy.i64(0)], launch={"grid": [1]}) == "t1"
    assert len(g) == 2
    assert g.json() == {
        "tasks": [
            {
                "name": "init",
                "kernel": "fill",
                "on": "chip0",
                "args": [{"tensor": t.json(), "tag": "output"}, {"scalar": {"float32": 1.5}}],
            },
            {
                "name": "t1",
                "kernel": "sleep_ms",
                "on": "sub0",
                "args": [{"scalar": {"int64": 0}}],
                "launch": {"grid": [1]},
            },
        ]
    }


def test_run_infers_dependencies_and_returns_every_state(client: canopy.Client) -> None:
    with client.create_buffer(4096) as b:
        x = b.tensor("float32", 1000)
        total = b.tensor("float32", 1, byte_offset=4000)
        g = canopy.Graph()
        g.task("init", "fill", "chip0", [canopy.Out(x), canopy.f32(1.5)])
        g.task("sum", "reduce_sum", "sub0", [canopy.In(x), canopy.Out(total)])
        f = client.run(g)
        assert len(f.task_ids) == 2 and [s.name for s in f.accepted] == ["init", "sum"]
        result = f.result(timeout=10)
        assert result.ok and len(result) == 2
        assert result["sum"].state == "completed" and result[0].name == "init"
        assert result.ids == f.task_ids
        assert result["sum"].start_ns >= result["init"].end_ns
        assert b.numpy("float32")[1000] == 1500.0


def test_run_takes_a_dict_or_a_list_of_tasks(client: canopy.Client) -> None:
    task = {"name": "a", "kernel": "sleep_ms", "on": "sub0", "args": [{"scalar": {"int64": 0}}]}
    assert client.run({"tasks": [task]}).result(timeout=10).ok
    assert client.run([task]).result(timeout=10)["a"].ok


def test_a_failed_task_raises_its_error_and_its_dependents_fail(client: canopy.Client, daemon) -> None:  # type: ignore[no-untyped-def]
    with client.create_buffer(64) as b:
        t = b.tensor("float32", 4)
        g = canopy.Graph()
        g.task("crash", "segfault", "sub1")
        g.task("write", "fill", "sub1", [canopy.Out(t), 1.0])
        g.task("after", "scale", "sub0", [canopy.InOut(t), 2.0])
        f = client.run(g)
        with pytest.raises(canopy.WorkerDied) as e:
            f.result(timeout=20)
        assert e.value.task is not None and e.value.task.name == "crash"
        assert e.value.tasks["crash"].error.code == "WORKER_DIED"
        assert not e.value.tasks.ok and len(e.value.tasks) == 3
    daemon.wait_ready()


def test_a_dependent_of_a_cancelled_task_gets_dependency_failed(client: canopy.Client) -> None:
    blocker = client.submit("sleep_ms", "sub1", canopy.i64(400))
    with client.create_buffer(64) as b:
        x = b.tensor("float32", 4)
        hold = client.submit("fill", "sub1", canopy.Out(x), 1.0)  # in sub1's mailbox behind the blocker
        g = canopy.Graph()
        g.task("a", "fill", "sub0", [canopy.Out(x), 2.0])  # queued: waits for hold
        g.task("b", "scale", "sub0", [canopy.InOut(x), 3.0])  # waits for a
        f = client.run(g)
        states = client.cancel(f.task_ids[0])
        assert states[0].cancel == "cancelled"
        with pytest.raises(canopy.Cancelled) as e:
            f.result(timeout=10)
        assert e.value.task is not None and e.value.task.name == "a"
        b_state = e.value.tasks["b"]
        assert b_state.state == "failed" and b_state.error.code == "DEPENDENCY_FAILED"
        dep = canopy.errors.error_for(b_state.error.code, b_state.error.message)
        assert isinstance(dep, canopy.DependencyFailed) and dep.code == "DEPENDENCY_FAILED"
        assert hold.result(timeout=10).ok
    assert blocker.result(timeout=10).ok


def test_a_rejected_graph_runs_nothing_and_raises_the_rejection(client: canopy.Client, buf: canopy.Buffer) -> None:
    g = canopy.Graph()
    g.task("ok", "fill", "sub0", [canopy.Out(buf.tensor("float32", 4)), 7.0])
    g.task("bad", "fill", "chip9", [canopy.Out(buf.tensor("float32", 4, byte_offset=16)), 1.0])
    f = client.run(g)
    with pytest.raises(canopy.UnknownWorker) as e:
        f.result(timeout=10)
    assert e.value.task is not None and e.value.task.name == "bad"
    assert e.value.tasks["ok"].state == "rejected"
    assert e.value.tasks["ok"].error.message.startswith("not run: ")
    assert buf.numpy("float32")[0] != 7.0


def test_duplicate_names_reject_the_graph(client: canopy.Client) -> None:
    g = canopy.Graph()
    g.task("a", "sleep_ms", "sub0", [0])
    g.task("a", "sleep_ms", "sub0", [0])
    with pytest.raises(canopy.BadRequest, match="task name 'a' is used twice"):
        client.run(g).result(timeout=10)


def test_an_empty_graph_is_bad_request(client: canopy.Client) -> None:
    with pytest.raises(canopy.BadRequest, match="graph.tasks: expected a non-empty array"):
        client.run(canopy.Graph())


def test_a_graph_of_10000_tasks_builds_runs_and_resolves(client: canopy.Client) -> None:
    n = 10_000
    with client.create_buffer(4 * n) as b:
        start = time.perf_counter()
        g = canopy.Graph()
        for i in range(n):
            g.task(
                None,
                "fill",
                "sub0" if i % 2 else "sub1",
                [canopy.Out(b.tensor("float32", 1, byte_offset=4 * i)), float(i)],
            )
        f = client.run(g)
        submitted = time.perf_counter() - start
        result = f.result(timeout=60)
        assert len(result) == n and result.ok
        assert np.array_equal(b.numpy("float32"), np.arange(n, dtype=np.float32))
        assert submitted < 5.0  # the benchmark measures it; this only catches a pathological slowdown


def state(name: str, state: str, code: str | None = None, message: str = "") -> dict[str, object]:
    s: dict[str, object] = {"name": name, "id": hash(name) & 0xFFFF, "kernel": "k", "on": "/sub0", "state": state}
    if code is not None:
        s["error"] = {"code": code, "message": message}
    return s


def test_a_graph_raises_the_error_of_its_first_task_that_failed_of_its_own_accord() -> None:
    result = canopy.GraphResult(
        raw=[
            state("a", "completed"),
            state("b", "failed", "DEPENDENCY_FAILED", "depends on c"),
            state("c", "failed", "WORKER_DIED", "worker /sub0 died"),
            state("d", "failed", "KERNEL_FAILED", "later"),
        ]
    )
    e = canopy.futures.graph_error(result)
    assert isinstance(e, canopy.WorkerDied) and e.task is not None and e.task.name == "c"
    assert e.tasks is result and [s.name for s in result.failed()] == ["b", "c", "d"]
    rejected = canopy.GraphResult(
        raw=[
            state("x", "rejected", "BAD_REQUEST", "not run: task 'y' of this graph was rejected"),
            state("y", "rejected", "INVALID_TENSOR", "tasks[1].args[0]: bad"),
        ]
    )
    e = canopy.futures.graph_error(rejected)
    assert isinstance(e, canopy.InvalidTensor) and e.message == "tasks[1].args[0]: bad"
