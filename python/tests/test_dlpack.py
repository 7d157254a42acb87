"""The DLPack producer of canopy.cuda, exercised on host memory (kDLCPU) with numpy as the consumer: the
capsule, the deleter and the owner's export count are the same code that hands device memory to torch."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from canopy.cuda import DLPackView, live_exports


class HostOwner:
    """Stands in for a CudaMapping: counts the tensors made from it."""

    def __init__(self, nbytes: int) -> None:
        self.memory = np.zeros(nbytes, dtype=np.uint8)
        self.exports = 0

    def pointer(self) -> int:
        return int(self.memory.ctypes.data)

    def _acquire(self) -> None:
        self.exports += 1

    def _release(self) -> None:
        self.exports -= 1


def test_numpy_takes_a_view_without_a_copy_and_its_deletion_releases_the_owner() -> None:
    owner = HostOwner(4096)
    view = DLPackView(owner, owner.pointer() + 16, "float32", (4, 8), (16, 2), (1, 0))
    assert view.__dlpack_device__() == (1, 0)
    before = live_exports()
    a = np.from_dlpack(view)
    assert owner.exports == 1 and live_exports() == before + 1
    assert a.shape == (4, 8) and a.strides == (64, 8) and a.dtype == np.float32
    flat = owner.memory[16:].view(np.float32)
    flat[1 * 16 + 2 * 2] = 7.5
    assert a[1, 2] == 7.5  # the consumer sees the owner's memory itself
    del a
    gc.collect()
    assert owner.exports == 0 and live_exports() == before


def test_an_unconsumed_capsule_releases_the_owner_when_collected() -> None:
    owner = HostOwner(64)
    capsule = DLPackView(owner, owner.pointer(), "int32", (16,), (1,), (1, 0)).__dlpack__()
    assert type(capsule).__name__ == "PyCapsule"
    assert owner.exports == 1
    del capsule
    gc.collect()
    assert owner.exports == 0


def test_every_dtype_has_its_dlpack_code() -> None:
    owner = HostOwner(64)
    for name in ("float32", "float64", "int8", "uint8", "int16", "int32", "int64", "float16"):
        a = np.from_dlpack(DLPackView(owner, owner.pointer(), name, (2,), (1,), (1, 0)))
        assert a.dtype == np.dtype(name)
        del a
    gc.collect()
    assert owner.exports == 0


def test_a_view_refuses_to_copy_or_move() -> None:
    owner = HostOwner(64)
    view = DLPackView(owner, owner.pointer(), "uint8", (64,), (1,), (1, 0))
    with pytest.raises(BufferError, match="never copy"):
        view.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="not \\(2, 0\\)"):
        view.__dlpack__(dl_device=(2, 0))
    assert owner.exports == 0


def test_a_missing_driver_is_a_cuda_error_naming_the_library() -> None:
    from canopy.cuda import CudaError, Driver

    with pytest.raises(CudaError, match="libcuda-missing.so.1 cannot be loaded") as e:
        Driver("libcuda-missing.so.1")
    assert e.value.call == "dlopen"


def test_a_host_buffer_has_no_device_import(client) -> None:  # type: ignore[no-untyped-def]
    with client.create_buffer(4096, backend="vmm", on="chip0") as b:
        assert b.backend == "sim_vmm"
        with pytest.raises(ValueError, match=f"buffer {b.id} is sim_vmm; only cuda_vmm imports on a GPU"):
            b.cuda()
