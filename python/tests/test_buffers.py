"""buffer.create / list / show / release / fd, the numpy views over the mapping, and their errors."""

from __future__ import annotations

import mmap
import os
import time

import numpy as np
import pytest

import canopy


def test_create_returns_a_buffer_described_by_the_daemon(client: canopy.Client) -> None:
    with client.create_buffer(8192, access="r") as b:
        assert b.nbytes == 8192
        assert b.backend == "posix_shm"
        assert b.access == "r"
        assert b.info.owner_uid == os.getuid()
        assert len(b.id.split(".")) == 3


def test_list_and_show_name_the_buffer(client: canopy.Client, buf: canopy.Buffer) -> None:
    assert buf.id in [b.id for b in client.list_buffers()]
    shown = client.show_buffer(buf.id)
    assert shown.id == buf.id and shown.nbytes == 4096
    assert client.buffer(buf.id).info == shown
    assert buf.show() == shown


def test_create_rejects_a_size_over_the_limit_with_bad_request(client: canopy.Client) -> None:
    with pytest.raises(canopy.BadRequest) as e:
        client.create_buffer(1 << 62)
    assert e.value.code == "BAD_REQUEST"
    assert "is over the limit of 281474976710656 bytes" in e.value.message


def test_a_vmm_buffer_on_a_sub_is_no_consumer(client: canopy.Client) -> None:
    with pytest.raises(canopy.NoConsumer) as e:
        client.create_buffer(4096, backend="vmm", on="sub0")
    assert e.value.code == "NO_CONSUMER"
    assert e.value.message == "no live child of / named /sub0 can consume a sim_vmm buffer"


def test_create_on_an_unknown_worker_is_unknown_worker(client: canopy.Client) -> None:
    with pytest.raises(canopy.UnknownWorker) as e:
        client.create_buffer(4096, backend="vmm", on="chip9")
    assert e.value.message == "no worker 'chip9' (children: /chip0, /chip1, /sub0, /sub1)"


def test_show_of_an_unknown_id_is_unknown_buffer(client: canopy.Client) -> None:
    with pytest.raises(canopy.UnknownBuffer) as e:
        client.show_buffer("00000000000000000000000000000000.99.1")
    assert e.value.code == "UNKNOWN_BUFFER"
    with pytest.raises(canopy.UnknownBuffer) as e:
        client.show_buffer("not-an-id")
    assert e.value.message == "buffer: no buffer 'not-an-id' (not a buffer ID nor a preloaded arena's name)"


def test_a_released_buffer_is_stale(client: canopy.Client) -> None:
    b = client.create_buffer(4096)
    b.release()
    assert b.released
    for call in (lambda: client.show_buffer(b.id), lambda: client.release_buffer(b.id), lambda: b.map()):
        with pytest.raises(canopy.StaleBuffer) as e:
            call()
        assert e.value.code == "STALE_BUFFER"
        assert e.value.message == f"buffer: buffer {b.id} was released"


def test_context_manager_releases_the_buffer(client: canopy.Client) -> None:
    with client.create_buffer(4096) as b:
        bid = b.id
        assert bid in [x.id for x in client.list_buffers()]
    assert b.released
    assert bid not in [x.id for x in client.list_buffers()]


def test_context_manager_releases_on_an_exception(client: canopy.Client) -> None:
    with pytest.raises(RuntimeError):
        with client.create_buffer(4096) as b:
            raise RuntimeError("boom")
    assert b.id not in [x.id for x in client.list_buffers()]


def test_numpy_view_is_the_buffers_own_memory(client: canopy.Client, buf: canopy.Buffer) -> None:
    a = buf.numpy("float32", (1024,))
    b = buf.numpy("float32")
    assert a.shape == (1024,) and b.shape == (1024,)
    a[:] = np.arange(1024, dtype=np.float32)
    # Two views, one mapping: a write through one is in the other, with no copy.
    assert np.shares_memory(a, b)
    assert b[1023] == 1023.0
    assert buf.numpy("uint8", (16,), offset=4).tobytes() == a[1:5].tobytes()


def test_numpy_view_past_the_end_is_refused(buf: canopy.Buffer) -> None:
    with pytest.raises(ValueError, match="needs 4100 bytes"):
        buf.numpy("uint8", (4100,))
    with pytest.raises(ValueError, match="outside"):
        buf.numpy("uint8", offset=5000)


def test_bfloat16_has_no_numpy_view(buf: canopy.Buffer) -> None:
    with pytest.raises(TypeError, match="bfloat16 has no numpy dtype"):
        buf.numpy("bfloat16")


def test_read_only_mapping_gives_read_only_arrays(client: canopy.Client, buf: canopy.Buffer) -> None:
    buf.numpy("int32")[:4] = [1, 2, 3, 4]
    ro = buf.numpy("int32", writable=False)
    assert not ro.flags.writeable
    assert list(ro[:4]) == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="read-only"):
        ro[0] = 5


def test_read_only_fd_cannot_be_mapped_writable(buf: canopy.Buffer) -> None:
    with buf.fds("read") as grant:
        assert not grant.writable and len(grant.fds) == 1
        with pytest.raises(PermissionError):
            mmap.mmap(grant.fds[0], grant.nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        m = mmap.mmap(grant.fds[0], grant.nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        m.close()


def test_fd_grant_reports_the_buffer_and_closes_its_fds(buf: canopy.Buffer) -> None:
    grant = buf.fds()
    assert grant.writable and grant.nbytes == 4096 and grant.info.id == buf.id
    fd = grant.fds[0]
    assert os.fstat(fd).st_size >= 4096
    assert os.get_inheritable(fd) is False  # received close-on-exec
    grant.close()
    with pytest.raises(OSError):
        os.fstat(fd)


def test_fd_with_a_bad_access_is_bad_request(buf: canopy.Buffer) -> None:
    with pytest.raises(canopy.BadRequest, match='access: expected "read" or "readwrite", got "write"'):
        buf.fds("write")


def test_fd_of_an_unknown_buffer_is_unknown_buffer(client: canopy.Client) -> None:
    with pytest.raises(canopy.UnknownBuffer):
        client.buffer_fds("00000000000000000000000000000000.99.1")


def test_fds_do_not_leak_in_this_process(client: canopy.Client, buf: canopy.Buffer) -> None:
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(200):
        buf.fds().close()
    for _ in range(50):
        with pytest.raises(canopy.UnknownBuffer):
            client.buffer_fds("00000000000000000000000000000000.99.1")
    assert len(os.listdir("/proc/self/fd")) == before


def shm_buffers(client: canopy.Client) -> int:
    (line,) = [x for x in client.metrics().splitlines() if x.startswith('canopy_buffers{backend="posix_shm"}')]
    return int(float(line.split()[-1]))


def test_mapping_outlives_the_release(client: canopy.Client) -> None:
    before = shm_buffers(client)
    b = client.create_buffer(4096)
    assert shm_buffers(client) == before + 1
    view = b.numpy("uint8")
    view[:3] = [7, 8, 9]
    b.release()
    # The daemon no longer orders anything over it, but the memory stays valid while the view exists.
    view[3] = 10
    assert list(view[:4]) == [7, 8, 9, 10]
    assert b.id not in [x.id for x in client.list_buffers()]
    assert shm_buffers(client) == before


def test_fd_hand_overs_leak_no_fd_in_the_daemon(client: canopy.Client, buf: canopy.Buffer) -> None:
    fd_dir = f"/proc/{client.status()['pid']}/fd"
    if not os.access(fd_dir, os.R_OK):
        pytest.skip(f"{fd_dir} is not readable by this uid")

    def files() -> list[str]:  # the daemon's fds but its sockets, which come and go with other clients
        links = []
        for fd in os.listdir(fd_dir):
            try:
                links.append(os.readlink(f"{fd_dir}/{fd}"))
            except FileNotFoundError:
                pass
        return sorted(x for x in links if not x.startswith("socket:"))

    def settled() -> int:
        # The daemon closes its copy of a handed-over fd once the reply's first byte is sent, which can be
        # just after the client has it: count again until the count holds still.
        last, deadline = len(files()), time.monotonic() + 5
        while time.monotonic() < deadline:
            time.sleep(0.05)
            now = len(files())
            if now == last:
                return now
            last = now
        return last

    buf.fds().close()
    before = settled()
    for i in range(1000):
        buf.fds("read" if i % 2 else "readwrite").close()
    with pytest.raises(canopy.UnknownBuffer):
        client.buffer_fds("00000000000000000000000000000000.99.1")
    assert settled() <= before, files()


def test_tensor_numpy_follows_strides_and_offset(buf: canopy.Buffer) -> None:
    whole = buf.numpy("float32", (32, 32))
    whole[:] = np.arange(1024, dtype=np.float32).reshape(32, 32)
    t = buf.tensor("float32", (4, 8), strides=(64, 2), byte_offset=4 * 3)
    v = t.numpy()
    assert v.shape == (4, 8)
    assert np.array_equal(v, whole.reshape(-1)[3:].reshape(-1)[: 4 * 64].reshape(4, 64)[:, :16:2])


def test_tensor_numpy_past_the_end_is_refused(buf: canopy.Buffer) -> None:
    with pytest.raises(ValueError, match="reaches past the end"):
        buf.tensor("float32", (1025,)).numpy()


def test_tensor_json_is_the_protocols(buf: canopy.Buffer) -> None:
    assert buf.tensor("float32", 8).json() == {"buffer": buf.id, "dtype": "float32", "shape": [8]}
    assert buf.tensor(np.int64, (2, 3), strides=(3, 1), byte_offset=16).json() == {
        "buffer": buf.id,
        "dtype": "int64",
        "shape": [2, 3],
        "strides": [3, 1],
        "byte_offset": 16,
    }


def test_tensor_rejects_unknown_dtypes_and_non_integer_shapes(buf: canopy.Buffer) -> None:
    with pytest.raises(ValueError, match="unknown dtype 'float8'"):
        buf.tensor("float8", 4)
    with pytest.raises(ValueError, match="numpy dtype complex64 has no canopy dtype"):
        buf.tensor(np.complex64, 4)
    with pytest.raises(TypeError, match=r"shape\[0\]: expected an integer, got 2.0"):
        buf.tensor("float32", (2.0,))  # type: ignore[arg-type]


def test_each_rank_of_a_symmetric_buffer_has_its_own_view(client: canopy.Client) -> None:
    with client.create_buffer(64, backend="symmetric", world=["chip0", "chip1"]) as s:
        assert s.backend == "sim_vmm" and len(s.map().regions) == 2
        t = s.tensor("int32", 16)
        # A tensor over a symmetric buffer names the copy of the rank that runs the task.
        client.submit("fill", "chip0", canopy.Out(t), canopy.i64(3)).result(timeout=10)
        client.submit("fill", "chip1", canopy.Out(t), canopy.i64(4)).result(timeout=10)
        assert list(s.numpy("int32", rank=0)) == [3] * 16
        assert list(s.numpy("int32", rank=1)) == [4] * 16
        with pytest.raises(IndexError, match="rank 2: this buffer has 2 mapped copies"):
            s.numpy("int32", rank=2)
