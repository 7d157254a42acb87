"""Device buffers in this process: a ``cuda_vmm`` buffer's fds imported with the CUDA driver API, exposed
through DLPack (``torch.from_dlpack(buf.cuda_view("float32", (1024,)))``).

The driver is reached through ctypes on libcuda.so.1; nothing is compiled. An import runs, per fd (one per
rank of a symmetric buffer): ``cuMemImportFromShareableHandle`` (the fd's value cast to a pointer), then
the fd is closed, ``cuMemAddressReserve`` of the size padded to the allocation's granularity, ``cuMemMap``
and ``cuMemSetAccess`` for this process's device; tear-down runs in reverse (unmap, free the address range,
release the handle, release the primary context). The device memory lives while any handle or mapping of it
exists in any process, so a mapping here stays valid after the buffer's release.

Thread safety: a CudaMapping may be shared between threads; exports and tear-down are counted under a lock,
and the mapping is torn down only once it is closed and no DLPack tensor made from it is alive.
"""

from __future__ import annotations

import ctypes
import threading
from typing import TYPE_CHECKING, Any, Callable

from .tensor import DTYPE_SIZES, Tensor, row_major_strides

if TYPE_CHECKING:
    from .buffer import FdGrant

_HANDLE_TYPE_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_LOCATION_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_ACCESS_READWRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_GRANULARITY_RECOMMENDED = 1  # CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
_DL_CUDA = 2  # kDLCUDA

# canopy dtype -> DLPack (type code, bits): kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4.
_DL_DTYPES: dict[str, tuple[int, int]] = {
    "float32": (2, 32),
    "float16": (2, 16),
    "bfloat16": (4, 16),
    "float64": (2, 64),
    "int8": (0, 8),
    "uint8": (1, 8),
    "int16": (0, 16),
    "int32": (0, 32),
    "int64": (0, 64),
}


class CudaError(RuntimeError):
    """A CUDA driver call failed (or the driver is missing): ``call`` names it, ``result`` is its CUresult."""

    def __init__(self, call: str, result: int, detail: str = "") -> None:
        self.call = call
        self.result = result
        super().__init__(f"{call} failed: {detail}" if detail else f"{call} failed with CUresult {result}")


class _MemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _AllocationProp(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _MemLocation),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _MemLocation), ("flags", ctypes.c_int)]


class Driver:
    """The CUDA driver API through ctypes; ``Driver.get()`` loads it once per process."""

    _instance: Driver | None = None
    _lock = threading.Lock()

    # name -> argument types; every entry point returns a CUresult (int).
    _SIGNATURES: dict[str, list[Any]] = {
        "cuInit": [ctypes.c_uint],
        "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
        "cuDeviceGetCount": [ctypes.POINTER(ctypes.c_int)],
        "cuDevicePrimaryCtxRetain": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int],
        "cuDevicePrimaryCtxRelease_v2": [ctypes.c_int],
        "cuCtxSetCurrent": [ctypes.c_void_p],
        "cuMemImportFromShareableHandle": [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_void_p, ctypes.c_int],
        "cuMemGetAllocationPropertiesFromHandle": [ctypes.POINTER(_AllocationProp), ctypes.c_ulonglong],
        "cuMemGetAllocationGranularity": [
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.POINTER(_AllocationProp),
            ctypes.c_int,
        ],
        "cuMemAddressReserve": [
            ctypes.POINTER(ctypes.c_ulonglong),
            ctypes.c_size_t,
            ctypes.c_size_t,
            ctypes.c_ulonglong,
            ctypes.c_ulonglong,
        ],
        "cuMemAddressFree": [ctypes.c_ulonglong, ctypes.c_size_t],
        "cuMemMap": [ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_ulonglong, ctypes.c_ulonglong],
        "cuMemUnmap": [ctypes.c_ulonglong, ctypes.c_size_t],
        "cuMemSetAccess": [ctypes.c_ulonglong, ctypes.c_size_t, ctypes.POINTER(_AccessDesc), ctypes.c_size_t],
        "cuMemRelease": [ctypes.c_ulonglong],
        "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    }

    def __init__(self, library: str = "libcuda.so.1") -> None:
        try:
            self._lib = ctypes.CDLL(library)
        except OSError as e:
            raise CudaError(
                "dlopen", -1, f"{library} cannot be loaded ({e}); is the NVIDIA driver installed?"
            ) from None
        self.fn: dict[str, Callable[..., int]] = {}
        for name, argtypes in self._SIGNATURES.items():
            f = getattr(self._lib, name)
            f.argtypes = argtypes
            f.restype = ctypes.c_int
            self.fn[name] = f
        self.check(self.fn["cuInit"](0), "cuInit")

    @classmethod
    def get(cls) -> Driver:
        with cls._lock:
            if cls._instance is None:
                cls._instance = Driver()
            return cls._instance

    def error_name(self, result: int) -> str:
        name = ctypes.c_char_p()
        if self.fn["cuGetErrorName"](result, ctypes.byref(name)) == 0 and name.value:
            return name.value.decode()
        return f"CUresult {result}"

    def check(self, result: int, call: str, detail: str = "") -> None:
        """The one place a CUresult becomes an exception naming the call and the error."""
        if result != 0:
            what = self.error_name(result) + (f" ({detail})" if detail else "")
            raise CudaError(call, result, what)

    def call(self, name: str, *args: Any, detail: str = "") -> None:
        self.check(self.fn[name](*args), name.removesuffix("_v2"), detail)


def device_count() -> int:
    """The CUDA devices this process sees; 0 when there is no driver or no device."""
    try:
        driver = Driver.get()
    except CudaError:
        return 0
    n = ctypes.c_int(0)
    return n.value if driver.fn["cuDeviceGetCount"](ctypes.byref(n)) == 0 else 0


class _Import:
    """One rank's imported allocation: handle, reserved range and mapping, torn down in reverse."""

    def __init__(self, driver: Driver, fd: int, nbytes: int, device: int) -> None:
        self.driver = driver
        self.handle = ctypes.c_ulonglong(0)
        self.address = ctypes.c_ulonglong(0)
        self.size = 0
        self.mapped = False
        # The fd's value, cast to a pointer, is the handle; its address would be wrong.
        driver.call(
            "cuMemImportFromShareableHandle", ctypes.byref(self.handle), ctypes.c_void_p(fd), _HANDLE_TYPE_POSIX_FD
        )
        try:
            prop = _AllocationProp()
            driver.call("cuMemGetAllocationPropertiesFromHandle", ctypes.byref(prop), self.handle)
            granularity = ctypes.c_size_t(0)
            driver.call(
                "cuMemGetAllocationGranularity", ctypes.byref(granularity), ctypes.byref(prop), _GRANULARITY_RECOMMENDED
            )
            g = granularity.value or 1
            size = (nbytes + g - 1) // g * g
            driver.call("cuMemAddressReserve", ctypes.byref(self.address), size, 0, 0, 0, detail=f"{size} bytes")
            self.size = size
            driver.call("cuMemMap", self.address, size, 0, self.handle, 0, detail=f"{size} bytes")
            self.mapped = True
            desc = _AccessDesc(_MemLocation(_LOCATION_DEVICE, device), _ACCESS_READWRITE)
            driver.call(
                "cuMemSetAccess",
                self.address,
                size,
                ctypes.byref(desc),
                1,
                detail=f"device {device} on memory of device {prop.location.id}",
            )
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        fn = self.driver.fn
        if self.mapped:
            fn["cuMemUnmap"](self.address, self.size)
            self.mapped = False
        if self.address.value:
            fn["cuMemAddressFree"](self.address, self.size)
            self.address = ctypes.c_ulonglong(0)
        if self.handle.value:
            fn["cuMemRelease"](self.handle)
            self.handle = ctypes.c_ulonglong(0)


class CudaMapping:
    """A ``cuda_vmm`` buffer imported on ``device`` of this process: one device pointer per rank."""

    def __init__(self, grant: FdGrant, device: int) -> None:
        self.nbytes = grant.nbytes
        self.device = device
        self.buffer_id = grant.info.id
        self._imports: list[_Import] = []
        self._lock = threading.Lock()
        self._exports = 0
        self._closing = False
        self._context_held = False
        try:
            if grant.info.backend != "cuda_vmm":
                raise ValueError(f"buffer {grant.info.id} is {grant.info.backend}; only cuda_vmm imports on a GPU")
            self.driver = Driver.get()
            dev = ctypes.c_int(0)
            self.driver.call("cuDeviceGet", ctypes.byref(dev), device, detail=f"device {device}")
            self._dev = dev.value
            ctx = ctypes.c_void_p(0)
            self.driver.call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), self._dev)
            self._context_held = True
            self.driver.call("cuCtxSetCurrent", ctx)
            for fd in list(grant.fds):
                self._imports.append(_Import(self.driver, fd, grant.nbytes, device))
        except BaseException:
            self._teardown()
            raise
        finally:
            grant.close()  # the handles keep the memory; the fds are not needed once imported

    def pointer(self, rank: int = 0) -> int:
        """The device address of rank ``rank``'s copy."""
        if not 0 <= rank < len(self._imports):
            raise IndexError(f"rank {rank}: buffer {self.buffer_id} has {len(self._imports)} imported copies")
        return int(self._imports[rank].address.value)

    def view(self, t: Tensor, rank: int = 0) -> DLPackView:
        """A DLPack producer for the view ``t`` of rank ``rank``'s copy."""
        strides = t.strides if t.strides is not None else row_major_strides(t.shape)
        size = DTYPE_SIZES[t.dtype]
        extent = (
            0
            if any(s == 0 for s in t.shape)
            else (sum((n - 1) * s for n, s in zip(t.shape, strides, strict=True)) + 1) * size
        )
        if t.byte_offset > self.nbytes or extent > self.nbytes - t.byte_offset:
            raise ValueError(f"{t!r} reaches past the end of the {self.nbytes}-byte buffer {self.buffer_id}")
        return DLPackView(self, self.pointer(rank) + t.byte_offset, t.dtype, t.shape, strides, (_DL_CUDA, self.device))

    def _acquire(self) -> None:
        with self._lock:
            if self._closing and self._exports == 0 and not self._imports:
                raise ValueError(f"the device mapping of buffer {self.buffer_id} is closed")
            self._exports += 1

    def _release(self) -> None:
        with self._lock:
            self._exports -= 1
            last = self._closing and self._exports == 0
        if last:
            self._teardown()

    def close(self) -> None:
        """Tears the mapping down now, or when the last DLPack tensor made from it is deleted."""
        with self._lock:
            self._closing = True
            now = self._exports == 0
        if now:
            self._teardown()

    def _teardown(self) -> None:
        with self._lock:
            imports, self._imports = self._imports, []
            held, self._context_held = self._context_held, False
        for imp in reversed(imports):
            imp.close()
        if held:
            self.driver.fn["cuDevicePrimaryCtxRelease_v2"](self._dev)

    def __del__(self) -> None:
        if self._exports == 0:
            self._teardown()


# -- DLPack -----------------------------------------------------------------------------------------------


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]

_CAPSULE_NAME = b"dltensor"
_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_PyCapsule_IsValid = ctypes.pythonapi.PyCapsule_IsValid
_PyCapsule_IsValid.restype = ctypes.c_int
_PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# Every DLManagedTensor handed out and not yet deleted, by address: it keeps the struct, its shape and
# strides arrays and its mapping alive until the consumer calls the deleter.
_live: dict[int, tuple[Any, ...]] = {}
_live_lock = threading.Lock()


def _delete_managed_impl(managed: Any) -> None:
    address = ctypes.cast(managed, ctypes.c_void_p).value or 0
    with _live_lock:
        entry = _live.pop(address, None)
    if entry is not None:
        entry[-1]._release()


def _capsule_destructor_impl(capsule: int) -> None:
    # A capsule nobody consumed still has its name: the producer deletes the tensor. A consumer renames it
    # "used_dltensor" and calls the deleter itself when done.
    if _PyCapsule_IsValid(capsule, _CAPSULE_NAME):
        pointer = _PyCapsule_GetPointer(capsule, _CAPSULE_NAME)
        if pointer:
            _delete_managed_impl(ctypes.cast(pointer, ctypes.POINTER(_DLManagedTensor)))


# The C callables; module globals, so they live as long as any capsule or tensor that points to them.
_delete_managed = _Deleter(_delete_managed_impl)
_capsule_destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_capsule_destructor_impl)


class DLPackView:
    """A view of memory that DLPack consumers take: ``torch.from_dlpack(view)``.

    ``owner`` keeps the memory mapped: each capsule handed out calls its ``_acquire()``, and the deleter of
    the consumer's tensor its ``_release()``. ``device`` is the DLPack device, ``(kDLCUDA, ordinal)`` for a
    device buffer. Each ``__dlpack__`` call hands out one legacy ``"dltensor"`` capsule; the memory stays
    mapped until the consumer's tensor is deleted, even if the buffer's mapping is closed first.
    """

    def __init__(
        self,
        owner: Any,
        data: int,
        dtype: str,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        device: tuple[int, int],
    ) -> None:
        self.owner = owner
        self.data = data
        self.dtype = dtype
        self.shape = shape
        self.strides = strides
        self.device = device

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device

    def __dlpack__(
        self,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        # The memory has no pending work of this producer, so no stream needs to wait for it.
        if dl_device is not None and tuple(dl_device) != self.device:
            raise BufferError(f"this view lives on DLPack device {self.device}, not {dl_device}; canopy does not copy")
        if copy:
            raise BufferError("canopy's DLPack views never copy")
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * ndim)(*self.shape)
        strides = (ctypes.c_int64 * ndim)(*self.strides)
        managed = _DLManagedTensor()
        code, bits = _DL_DTYPES[self.dtype]
        managed.dl_tensor = _DLTensor(
            ctypes.c_void_p(self.data),
            _DLDevice(*self.device),
            ndim,
            _DLDataType(code, bits, 1),
            shape,
            strides,
            0,
        )
        managed.manager_ctx = None
        managed.deleter = _delete_managed
        self.owner._acquire()
        address = ctypes.addressof(managed)
        with _live_lock:
            _live[address] = (managed, shape, strides, self.owner)
        try:
            return _PyCapsule_New(address, _CAPSULE_NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))
        except BaseException:
            _delete_managed_impl(ctypes.cast(address, ctypes.POINTER(_DLManagedTensor)))
            raise


def live_exports() -> int:
    """How many DLPack tensors handed out by this process are not yet deleted."""
    with _live_lock:
        return len(_live)
