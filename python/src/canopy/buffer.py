"""Buffers as Python objects: zero-copy numpy views over the buffer's own mapping, socket transfers, tensors.

A Buffer names one buffer of the daemon. ``numpy()`` maps its file descriptor (``buffer.fd``, passed over
the control socket with SCM_RIGHTS) into this process once and returns views of that mapping: what a task
writes is in the view once the task has finished, and what is written into the view is seen by tasks
submitted after the write. ``write()`` and ``read()`` move bytes through the socket instead (binary
attachments), which also works for device buffers. ``with`` releases the buffer on exit.

A mapping stays valid memory after the buffer is released (the daemon just no longer orders anything over
it); views keep their mapping alive as long as they exist.

Thread safety: a Buffer may be shared between threads; the mapping is made once under a lock.
"""

from __future__ import annotations

import mmap
import threading
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ._wire import close_fds
from .tensor import DTYPE_SIZES, DTypeLike, Tensor, dtype_name, numpy_dtype, row_major_strides
from .types import BufferInfo

if TYPE_CHECKING:
    from .client import Client
    from .cuda import CudaMapping, DLPackView

_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


@dataclass
class FdGrant:
    """The reply to ``buffer.fd``: the buffer, its size, whether the fds are writable, and the fds themselves
    (one, or one per rank of a symmetric buffer). The caller owns the fds: ``close()`` or ``with``."""

    info: BufferInfo
    nbytes: int
    writable: bool
    fds: list[int] = field(default_factory=list)

    def close(self) -> None:
        close_fds(self.fds)
        self.fds = []

    def __enter__(self) -> FdGrant:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Mapping:
    """A buffer's bytes mapped into this process: one ``mmap`` per fd (per rank), ``MAP_SHARED``.

    A read-only mapping gives read-only arrays; writing through one raises ValueError.
    """

    def __init__(self, grant: FdGrant, populate: bool = True) -> None:
        self.nbytes = grant.nbytes
        self.writable = grant.writable
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if grant.writable else 0)
        flags = mmap.MAP_SHARED | (_POPULATE if populate else 0)
        self.regions: list[mmap.mmap] = []
        try:
            for fd in grant.fds:
                self.regions.append(mmap.mmap(fd, grant.nbytes, flags=flags, prot=prot))
        except BaseException:
            self.close()
            raise
        finally:
            grant.close()  # each mmap holds its own duplicate of the fd

    def region(self, rank: int = 0) -> mmap.mmap:
        if not 0 <= rank < len(self.regions):
            raise IndexError(f"rank {rank}: this buffer has {len(self.regions)} mapped copies")
        return self.regions[rank]

    def bytes(self, rank: int = 0) -> np.ndarray[Any, Any]:
        """The whole region as a flat uint8 array. It holds a buffer export of the mmap, so the region
        cannot be unmapped while this array or any view of it exists (np.ndarray(buffer=mmap) holds none)."""
        return np.frombuffer(self.region(rank), dtype=np.uint8)

    def close(self) -> None:
        """Unmaps what no array still uses; a region still viewed stays until its last view is gone."""
        for r in self.regions:
            try:
                r.close()
            except BufferError:
                pass
        self.regions = []


def _view_extent(shape: Sequence[int], strides: Sequence[int], itemsize: int) -> int:
    if any(s == 0 for s in shape):
        return 0
    return (sum((n - 1) * st for n, st in zip(shape, strides, strict=True)) + 1) * itemsize


class Buffer:
    """One buffer of canopyd. Made by ``Client.create_buffer`` (or ``Client.buffer`` for an existing id)."""

    def __init__(self, client: Client, info: BufferInfo) -> None:
        self.client = client
        self.info = info
        self.released = False
        self._lock = threading.Lock()
        self._maps: dict[bool, Mapping] = {}
        self._cuda: CudaMapping | None = None

    # -- identity -----------------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def nbytes(self) -> int:
        return self.info.nbytes

    @property
    def backend(self) -> str:
        return self.info.backend

    @property
    def access(self) -> str:
        return self.info.access

    def __repr__(self) -> str:
        return f"Buffer({self.id}, {self.backend}, {self.nbytes} bytes, access={self.access})"

    def show(self) -> BufferInfo:
        """The buffer as the daemon describes it now (``buffer.show``)."""
        self.info = self.client.show_buffer(self.id)
        return self.info

    # -- tensors ------------------------------------------------------------------------------------------

    def tensor(
        self,
        dtype: DTypeLike,
        shape: Sequence[int] | int,
        strides: Sequence[int] | None = None,
        byte_offset: int = 0,
    ) -> Tensor:
        """A view of this buffer for a task argument (``canopy.In(t)`` and so on); strides in elements."""
        return Tensor(self, dtype, shape, strides, byte_offset)

    # -- the mapping --------------------------------------------------------------------------------------

    def map(self, writable: bool = True, populate: bool = True) -> Mapping:
        """The buffer's mapping in this process, made on first use from ``buffer.fd`` and kept.

        ``writable=False`` asks for read-only fds: the mapping is ``PROT_READ`` and its arrays read-only.
        ``populate`` maps every page at once (``MAP_POPULATE``) rather than on first touch.
        """
        with self._lock:
            m = self._maps.get(writable)
            if m is None or not m.regions:
                grant = self.client.buffer_fds(self.id, "readwrite" if writable else "read")
                m = Mapping(grant, populate)
                self._maps[writable] = m
            return m

    def numpy(
        self,
        dtype: DTypeLike = "uint8",
        shape: Sequence[int] | int | None = None,
        offset: int = 0,
        writable: bool = True,
        rank: int = 0,
    ) -> np.ndarray[Any, Any]:
        """A C-contiguous ndarray over the buffer's mapping, from byte ``offset`` (no copy).

        ``shape`` None means every whole element from ``offset`` to the end. A read-only mapping
        (``writable=False``) gives a read-only array. ``rank`` picks the copy of a symmetric ``sim_vmm``
        buffer.
        """
        dt = numpy_dtype(dtype_name(dtype))
        if offset < 0 or offset > self.nbytes:
            raise ValueError(f"offset {offset} is outside the {self.nbytes}-byte buffer {self.id}")
        if shape is None:
            dims: tuple[int, ...] = ((self.nbytes - offset) // dt.itemsize,)
        else:
            dims = (shape,) if isinstance(shape, int) else tuple(shape)
        count = int(np.prod(dims, dtype=np.int64)) if dims else 1
        if count * dt.itemsize > self.nbytes - offset:
            raise ValueError(
                f"shape {list(dims)} of {dt.name} at offset {offset} needs {count * dt.itemsize} bytes; "
                f"buffer {self.id} has {self.nbytes - offset} from there"
            )
        flat = self.map(writable).bytes(rank)
        return np.ndarray(dims, dtype=dt, buffer=flat, offset=offset)

    def view(self, t: Tensor, writable: bool = True, rank: int = 0) -> np.ndarray[Any, Any]:
        """The ndarray of a Tensor's view (its strides and byte offset) over this buffer's mapping."""
        if t.buffer_id != self.id:
            raise ValueError(f"tensor names buffer {t.buffer_id}, not {self.id}")
        dt = numpy_dtype(t.dtype)
        strides = t.strides if t.strides is not None else row_major_strides(t.shape)
        extent = _view_extent(t.shape, strides, dt.itemsize)
        if t.byte_offset > self.nbytes or extent > self.nbytes - t.byte_offset:
            raise ValueError(f"{t!r} reaches past the end of the {self.nbytes}-byte buffer {self.id}")
        flat = self.map(writable).bytes(rank)
        return np.ndarray(
            t.shape, dtype=dt, buffer=flat, offset=t.byte_offset, strides=tuple(s * dt.itemsize for s in strides)
        )

    def fds(self, access: str = "readwrite") -> FdGrant:
        """The buffer's file descriptors (``buffer.fd``); the caller closes them."""
        return self.client.buffer_fds(self.id, access)

    # -- bytes through the socket -------------------------------------------------------------------------

    def write(self, data: Any, offset: int = 0) -> int:
        """Writes a bytes-like object (bytes, bytearray, memoryview, a C-contiguous ndarray) at ``offset``
        through the socket; ordered with tasks like a task that writes those bytes. Returns the count."""
        return self.client.write_buffer(self.id, data, offset)

    def read(self, nbytes: int | None = None, offset: int = 0) -> bytearray:
        """Reads ``nbytes`` (default: to the end) from ``offset`` through the socket. A read past the end
        returns what there is (fewer bytes)."""
        return self.client.read_buffer(self.id, nbytes, offset)

    def readinto(self, out: Any, offset: int = 0) -> int:
        """Reads len(out) bytes from ``offset`` into a writable bytes-like object; returns the count read."""
        return self.client.read_buffer_into(self.id, out, offset)

    # -- device buffers -----------------------------------------------------------------------------------

    def cuda(self, device: int | None = None) -> CudaMapping:
        """Imports a ``cuda_vmm`` buffer on this process's GPU (default: the buffer's device); kept."""
        from .cuda import CudaMapping

        with self._lock:
            if self._cuda is None:
                grant = self.client.buffer_fds(self.id, "readwrite")
                self._cuda = CudaMapping(grant, self.info.device if device is None else device)
            return self._cuda

    def cuda_view(
        self,
        dtype: DTypeLike,
        shape: Sequence[int] | int | None = None,
        strides: Sequence[int] | None = None,
        byte_offset: int = 0,
        rank: int = 0,
    ) -> DLPackView:
        """A DLPack producer over the imported device memory: ``torch.from_dlpack(buf.cuda_view(...))``."""
        name = dtype_name(dtype)
        if shape is None:
            shape = ((self.nbytes - byte_offset) // DTYPE_SIZES[name],)
        return self.cuda().view(Tensor(self.id, name, shape, strides, byte_offset), rank)

    # -- lifetime -----------------------------------------------------------------------------------------

    def close_mappings(self) -> None:
        """Drops this object's mappings; arrays and DLPack tensors still using them keep them alive."""
        with self._lock:
            for m in self._maps.values():
                m.close()
            self._maps.clear()
            cuda, self._cuda = self._cuda, None
        if cuda is not None:
            cuda.close()

    def release(self) -> None:
        """Releases the buffer in the daemon (``buffer.release``) and drops the mappings."""
        self.close_mappings()
        self.client.release_buffer(self.id)
        self.released = True

    def __enter__(self) -> Buffer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self.released:
            self.release()
