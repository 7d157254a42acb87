"""submit, execute, wait, cancel and tasks; futures; and the error class of every code a task can get."""

from __future__ import annotations

import concurrent.futures
import time

import numpy as np
import pytest

import canopy
from conftest import Daemon


def test_submit_resolves_with_the_completed_state(client: canopy.Client, buf: canopy.Buffer) -> None:
    t = buf.tensor("float32", 1024)
    f = client.submit("fill", "chip0", canopy.Out(t), canopy.f32(1.5), name="init")
    assert isinstance(f, concurrent.futures.Future)
    assert f.task_id == f.accepted.id > 0
    state = f.result(timeout=10)
    assert state.state == "completed" and state.ok and state.done
    assert state.name == "init" and state.kernel == "fill" and state.on in ("chip0", "/chip0")
    assert state.id == f.task_id
    assert state.end_ns >= state.start_ns > 0


def test_task_output_is_in_the_numpy_view_once_the_future_resolved(client: canopy.Client, buf: canopy.Buffer) -> None:
    view = buf.numpy("float32")  # mapped before the task: the same memory the task writes
    client.submit("iota", "sub0", canopy.Out(buf.tensor("float32", 1024))).result(timeout=10)
    assert np.array_equal(view, np.arange(1024, dtype=np.float32))


def test_a_write_into_the_view_is_seen_by_a_task_submitted_after_it(client: canopy.Client) -> None:
    with client.create_buffer(8192) as b:
        view = b.numpy("float32")
        view[:1024] = np.arange(1024, dtype=np.float32) * 3
        src, dst = b.tensor("float32", 1024), b.tensor("float32", 1024, byte_offset=4096)
        client.submit("copy", "sub1", canopy.In(src), canopy.Out(dst)).result(timeout=10)
        assert np.array_equal(view[1024:], view[:1024])
        view[1024:] = 0
        client.submit("copy", "chip1", canopy.In(src), canopy.Out(dst)).result(timeout=10)
        assert np.array_equal(view[1024:], view[:1024])


def test_scalars_of_each_kind_reach_the_kernel(client: canopy.Client, buf: canopy.Buffer) -> None:
    view = buf.numpy("float32", (4,))
    for arg, expected in (
        (canopy.f32(2.5), 2.5),
        (canopy.f64(-1.25), -1.25),
        (canopy.i64(7), 7.0),
        (3, 3.0),
        (0.5, 0.5),
    ):
        client.submit("fill", "sub0", canopy.Out(buf.tensor("float32", 4)), arg).result(timeout=10)
        assert list(view) == [expected] * 4


def test_scalars_that_json_cannot_carry_are_refused_here() -> None:
    with pytest.raises(ValueError, match="f32: nan cannot be sent"):
        canopy.f32(float("nan"))
    with pytest.raises(TypeError, match="i64: expected an integer, got 1.5"):
        canopy.i64(1.5)  # type: ignore[arg-type]


def test_an_untagged_tensor_is_refused_before_sending(client: canopy.Client, buf: canopy.Buffer) -> None:
    with pytest.raises(TypeError, match=r"args\[0\]: a Tensor needs a tag"):
        client.submit("fill", "sub0", buf.tensor("float32", 4), 1.0)


def test_execute_runs_one_task_and_returns_its_state(client: canopy.Client) -> None:
    state = client.execute("sleep_ms", "sub0", canopy.i64(0))
    assert state.state == "completed"
    with pytest.raises(canopy.UnknownKernel):
        client.execute("nope", "sub0")


def test_wait_returns_the_states_of_the_ids_given(client: canopy.Client) -> None:
    a = client.submit("sleep_ms", "sub0", canopy.i64(1))
    b = client.submit("sleep_ms", "sub1", canopy.i64(1))
    states = client.wait([a.task_id, b.task_id])
    assert [s.id for s in states] == [a.task_id, b.task_id]
    assert all(s.state == "completed" for s in states)
    assert client.wait(a.task_id)[0].id == a.task_id


def test_wait_with_a_timeout_returns_the_task_as_it_is(client: canopy.Client) -> None:
    f = client.submit("sleep_ms", "sub1", canopy.i64(300))
    (state,) = client.wait(f.task_id, timeout_ms=10)
    assert state.state in ("queued", "running")
    assert f.result(timeout=10).state == "completed"


def test_wait_for_an_unknown_task_is_bad_request(client: canopy.Client) -> None:
    with pytest.raises(canopy.BadRequest) as e:
        client.wait(999999999)
    assert e.value.message == (
        "no task 999999999 (unknown, or finished longer ago than the daemon remembers: control.task_history)"
    )


def test_tasks_lists_recent_tasks(client: canopy.Client) -> None:
    f = client.submit("sleep_ms", "sub0", canopy.i64(0))
    f.result(timeout=10)
    assert f.task_id in [t.id for t in client.tasks()]


def test_cancel_of_a_queued_task_fails_its_future_with_cancelled(client: canopy.Client) -> None:
    blocker = client.submit("sleep_ms", "sub1", canopy.i64(400))
    with client.create_buffer(64) as b:
        # Waits for the blocker: both touch the buffer and the first writes it.
        hold = client.submit("fill", "sub1", canopy.Out(b.tensor("float32", 16)), 1.0)
        later = client.submit("fill", "sub0", canopy.Out(b.tensor("float32", 16)), 2.0)
        assert later.cancel()
        with pytest.raises(canopy.Cancelled) as e:
            later.result(timeout=10)
        assert isinstance(e.value, concurrent.futures.CancelledError)
        assert e.value.code == "CANCELLED" and "cancelled by uid" in e.value.message
        assert e.value.task is not None and e.value.task.id == later.task_id
        assert hold.result(timeout=10).ok
    assert blocker.result(timeout=10).ok
    assert not blocker.cancel()  # finished: nothing to cancel


def test_cancel_reports_each_tasks_outcome(client: canopy.Client) -> None:
    f = client.submit("sleep_ms", "sub0", canopy.i64(0))
    f.result(timeout=10)
    (state,) = client.cancel(f.task_id)
    assert state.cancel == "finished"
    with pytest.raises(canopy.BadRequest):
        client.cancel(999999999)


def test_futures_of_one_client_resolve_independently(client: canopy.Client) -> None:
    slow = client.submit("sleep_ms", "sub1", canopy.i64(500))
    fast = client.submit("sleep_ms", "sub0", canopy.i64(0))
    assert fast.result(timeout=10).ok
    assert not slow.done()  # the slow task's wait does not hold up the fast one
    assert slow.result(timeout=10).ok


def test_many_futures_resolve(client: canopy.Client) -> None:
    fs = [client.submit("sleep_ms", f"sub{i % 2}", canopy.i64(0)) for i in range(200)]
    done, not_done = concurrent.futures.wait(fs, timeout=30)
    assert not not_done
    assert all(f.result().ok for f in done)


def test_done_callbacks_run(client: canopy.Client) -> None:
    seen: list[int] = []
    f = client.submit("sleep_ms", "sub0", canopy.i64(0))
    f.add_done_callback(lambda fut: seen.append(fut.result().id))
    f.result(timeout=10)
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.001)
    assert seen == [f.task_id]


def test_closing_the_client_fails_the_futures_still_waiting(daemon: Daemon) -> None:
    c = canopy.connect(daemon.socket)
    f = c.submit("sleep_ms", "sub1", canopy.i64(300))
    c.close()
    with pytest.raises(canopy.Unreachable):
        f.result(timeout=10)
    with pytest.raises(canopy.Unreachable, match="the client is closed"):
        c.submit("sleep_ms", "sub1", canopy.i64(0))


def test_futures_fail_unreachable_when_the_daemon_dies() -> None:
    d = Daemon()
    try:
        c = canopy.connect(d.socket)
        f = c.submit("sleep_ms", "sub0", canopy.i64(5000))
        d.proc.kill()
        d.proc.wait()
        with pytest.raises(canopy.Unreachable):
            f.result(timeout=10)
        with pytest.raises(canopy.Unreachable):
            c.status()
        c.close()
    finally:
        d.stop()


# -- every error a task can get ---------------------------------------------------------------------------


def rejected(f: canopy.TaskFuture, cls: type[canopy.CanopyError]) -> canopy.CanopyError:
    with pytest.raises(cls) as e:
        f.result(timeout=10)
    assert e.value.code == cls.code
    return e.value


def test_unknown_kernel(client: canopy.Client) -> None:
    e = rejected(client.submit("no_such_kernel", "sub0"), canopy.UnknownKernel)
    assert e.message.startswith("task: unknown kernel 'no_such_kernel'; sub workers offer fill, iota, copy")
    assert e.task is not None and e.task.state == "rejected"


def test_unknown_worker(client: canopy.Client) -> None:
    e = rejected(client.submit("sleep_ms", "chip9", canopy.i64(0)), canopy.UnknownWorker)
    assert e.message == "task: no worker 'chip9' (children: /chip0, /chip1, /sub0, /sub1)"


def test_invalid_tensor(client: canopy.Client, buf: canopy.Buffer) -> None:
    e = rejected(client.submit("fill", "sub0", canopy.Out(buf.tensor("float32", 1025)), 1.0), canopy.InvalidTensor)
    assert e.message == "task.args[0].tensor.extent: view of 4100 bytes at offset 0 exceeds the 4096-byte buffer"
    f = client.submit("fill", "sub0", canopy.Out(buf.tensor("float32", 4, strides=[0])), 1.0)
    assert rejected(f, canopy.InvalidTensor).message == "task.args[0].tensor.strides[0]: stride must be > 0"


def test_overlapping_writes(client: canopy.Client, buf: canopy.Buffer) -> None:
    a, b = buf.tensor("float32", 8), buf.tensor("float32", 8, byte_offset=16)
    e = rejected(client.submit("copy", "sub0", canopy.In(a), canopy.Out(b)), canopy.OverlappingWrites)
    assert e.message == "task: args[1]: output overlaps args[0] (input) of the same buffer (partial)"


def test_access_denied_by_the_grant(client: canopy.Client) -> None:
    with client.create_buffer(64, access="r") as ro:
        e = rejected(client.submit("fill", "sub0", canopy.Out(ro.tensor("float32", 4)), 1.0), canopy.AccessDenied)
        assert e.message == "task: args[0]: output needs write access; the buffer grants read"


def test_unknown_and_released_buffers_in_a_task(client: canopy.Client) -> None:
    t = canopy.Tensor("00000000000000000000000000000000.99.1", "float32", 4)
    e = rejected(client.submit("fill", "sub0", canopy.Out(t), 1.0), canopy.UnknownBuffer)
    assert e.message.startswith("task.args[0].tensor.buffer: no buffer '00000000000000000000000000000000.99.1'")
    b = client.create_buffer(64)
    t = b.tensor("float32", 4)
    b.release()
    e = rejected(client.submit("fill", "sub0", canopy.Out(t), 1.0), canopy.StaleBuffer)
    assert e.message == f"task.args[0].tensor.buffer: buffer {b.id} was released"


def test_unreachable_buffer(client: canopy.Client) -> None:
    with client.create_buffer(4096, backend="vmm", on="chip0") as dev:
        assert dev.backend == "sim_vmm"
        e = rejected(client.submit("fill", "sub0", canopy.Out(dev.tensor("float32", 4)), 1.0), canopy.UnreachableBuffer)
        assert e.message == "task: args[0]: sim_vmm buffer cannot be reached from /sub0"


def test_pe_out_of_range(client: canopy.Client) -> None:
    with client.create_buffer(64, backend="symmetric", world=["chip0", "chip1"]) as s, client.create_buffer(64) as out:
        assert s.info.world == ("/chip0", "/chip1")
        args = (canopy.In(s.tensor("float32", 4)), canopy.Out(out.tensor("float32", 4)), canopy.i64(5))
        e = rejected(client.submit("peer_read", "chip0", *args), canopy.PeOutOfRange)
        assert e.message == "task: peer_read: pe 5 is out of range for a world of 2"


def test_worker_died(client: canopy.Client, daemon: Daemon) -> None:
    f = client.submit("segfault", "sub1")
    e = rejected(f, canopy.WorkerDied)
    assert e.message == f"worker /sub1 died (killed by signal 11 (SIGSEGV)) while running task {f.task_id}"
    daemon.wait_ready()


def test_bad_request_for_a_scalar_out_of_range(client: canopy.Client, buf: canopy.Buffer) -> None:
    e = rejected(
        client.submit("fill", "sub0", canopy.Out(buf.tensor("float32", 4)), canopy.f32(1e39)), canopy.BadRequest
    )
    assert e.message == "task.args[1].scalar.float32: 1e+39 is out of range for float32"


def test_no_consumer_for_a_module_without_cuda_chips(client: canopy.Client) -> None:
    with pytest.raises(canopy.NoConsumer, match="no live cuda chip"):
        client.load_module("mine", b"//\n.version 8.0\n.target sm_90\n.address_size 64\n", format="ptx")
    assert client.list_modules() == []


def test_timeout_kills_the_task_past_its_limit() -> None:
    d = Daemon(supervision={"task_timeout_ms": 100})
    try:
        with canopy.connect(d.socket) as c:
            e = rejected(c.submit("sleep_ms", "sub0", canopy.i64(5000)), canopy.Timeout)
            assert "ran past its timeout of 100 ms" in e.message
    finally:
        d.stop()
