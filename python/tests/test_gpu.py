"""A cuda_vmm buffer imported in this process and handed to torch through DLPack (needs a GPU and torch).

Runs a canopyd with one cuda chip on device 0. Skipped without torch, without a CUDA device, or without
libcuda.so.1.
"""

from __future__ import annotations

import gc
from typing import Any, Iterator

import numpy as np
import pytest

import canopy
from canopy.cuda import device_count
from conftest import Daemon

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch() -> Any:
    t = pytest.importorskip("torch")
    if device_count() == 0 or not t.cuda.is_available():
        pytest.skip("no CUDA device (or no libcuda.so.1) on this machine")
    return t


@pytest.fixture(scope="module")
def gpu_daemon(torch: Any) -> Iterator[Daemon]:
    d = Daemon(node={"name": "pytest", "chips": [{"device": 0, "backend": "cuda"}], "subs": 1})
    yield d
    d.stop()


@pytest.fixture
def gpu_client(gpu_daemon: Daemon) -> Iterator[canopy.Client]:
    with canopy.connect(gpu_daemon.socket) as c:
        yield c


def test_a_task_output_is_a_torch_tensor_without_a_copy(torch: Any, gpu_client: canopy.Client) -> None:
    n = 1 << 20
    with gpu_client.create_buffer(4 * n, backend="vmm", on="chip0") as b:
        assert b.backend == "cuda_vmm"
        gpu_client.submit("fill", "chip0", canopy.Out(b.tensor("float32", n)), canopy.f32(1.5)).result(timeout=30)
        view = b.cuda_view("float32", (n,))
        assert view.__dlpack_device__() == (2, b.info.device)
        t = torch.from_dlpack(view)
        assert t.is_cuda and t.shape == (n,) and t.dtype == torch.float32
        assert t.data_ptr() == b.cuda().pointer()
        assert bool((t == 1.5).all())
        # torch writes the device memory itself; a task submitted afterwards reads what torch wrote.
        t.mul_(2)
        torch.cuda.synchronize()
        with gpu_client.create_buffer(4) as out:
            gpu_client.submit(
                "reduce_sum", "chip0", canopy.In(b.tensor("float32", n)), canopy.Out(out.tensor("float32", 1))
            ).result(30)
            assert out.numpy("float32")[0] == pytest.approx(3.0 * n)
        # And the socket path reads the same bytes.
        head = np.frombuffer(b.read(16), dtype=np.float32)
        assert list(head) == [3.0] * 4
        del t
        gc.collect()


def test_strided_views_and_other_dtypes(torch: Any, gpu_client: canopy.Client) -> None:
    with gpu_client.create_buffer(1 << 16, backend="vmm", on="chip0") as b:
        gpu_client.submit("iota", "chip0", canopy.Out(b.tensor("int32", 1 << 14))).result(timeout=30)
        t = torch.from_dlpack(b.cuda_view("int32", (4, 8), strides=(16, 2), byte_offset=8))
        assert t.stride() == (16, 2)
        expected = torch.arange(1 << 14, dtype=torch.int32, device="cuda")[2:][: 4 * 16].reshape(4, 16)[:, ::2]
        assert bool((t == expected).all())
        h = torch.from_dlpack(b.cuda_view("bfloat16", (16,)))
        assert h.dtype == torch.bfloat16
        with pytest.raises(ValueError, match="reaches past the end"):
            b.cuda_view("float32", (1 << 15,))


def test_a_tensor_outlives_the_buffer_objects_mappings(torch: Any, gpu_client: canopy.Client) -> None:
    b = gpu_client.create_buffer(1 << 21, backend="vmm", on="chip0")
    gpu_client.submit("fill", "chip0", canopy.Out(b.tensor("float32", 1 << 19)), canopy.f32(4.0)).result(timeout=30)
    t = torch.from_dlpack(b.cuda_view("float32"))
    b.release()  # closes this object's mapping; the torch tensor still holds it
    assert float(t[7]) == 4.0
    del t
    gc.collect()


def test_a_shm_buffer_has_no_device_import(torch: Any, gpu_client: canopy.Client) -> None:
    with gpu_client.create_buffer(4096) as b:
        with pytest.raises(ValueError, match="only cuda_vmm imports"):
            b.cuda()
