"""Task arguments: typed views over buffers (Tensor), their tags (In, Out, InOut) and typed scalars.

A Tensor names a buffer by its id and describes a view of it: dtype, shape, strides in elements (row-major
when left out) and a byte offset. It carries no address; the daemon checks it against the buffer when a
task names it. Each argument encodes itself to its JSON text once, when it is made, so a graph of many tasks
is assembled from ready pieces.

Scalars are typed explicitly with f32, f64 and i64; a plain Python float is a float64 scalar and a plain int
an int64 scalar. Everything here is immutable and safe to share between threads.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any, Sequence, Union

import numpy as np

if TYPE_CHECKING:
    from .buffer import Buffer

# canopy's dtype names and their element sizes (docs/protocol.md, DataType).
DTYPE_SIZES: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
}

DTypeLike = Union[str, "np.dtype[Any]", type]


def dtype_name(dtype: DTypeLike) -> str:
    """canopy's name for a dtype given by name (``"float32"``) or as a numpy dtype (``np.float32``)."""
    if isinstance(dtype, str):
        if dtype in DTYPE_SIZES:
            return dtype
        raise ValueError(f"unknown dtype {dtype!r}; canopy has {', '.join(DTYPE_SIZES)}")
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise ValueError(f"unknown dtype {dtype!r}; canopy has {', '.join(DTYPE_SIZES)}") from None
    if name not in DTYPE_SIZES:
        raise ValueError(f"numpy dtype {name} has no canopy dtype; canopy has {', '.join(DTYPE_SIZES)}")
    return name


def numpy_dtype(name: str) -> np.dtype[Any]:
    """The numpy dtype of a canopy dtype; bfloat16 has none (view its bytes as uint16)."""
    if name == "bfloat16":
        raise TypeError("bfloat16 has no numpy dtype; view the bytes as uint16 or use DLPack")
    return np.dtype(name)


def _int(value: Any, what: str) -> int:
    # Only the type is checked here: ranges are the daemon's to check, with its one gate and its messages.
    if value.__class__ is int:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what}: expected an integer, got {value!r}")
    return int(value)


def _ints(values: Sequence[Any], what: str) -> tuple[int, ...]:
    return tuple([_int(v, f"{what}[{i}]") for i, v in enumerate(values)])


# The encoded "buffer" and "dtype" members of recent (buffer, dtype) pairs.
_heads: dict[tuple[str, str], str] = {}


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return tuple(strides)


class Tensor:
    """A typed view of a buffer: ``Tensor(buffer_id, "float32", (4, 256), strides=None, byte_offset=0)``.

    ``strides`` are in elements (row-major when None). Usually made by ``Buffer.tensor``, which also lets
    ``.numpy()`` return the same view of the buffer's mapping. Pass it to a task tagged: ``In(t)``, ``Out(t)``
    or ``InOut(t)``.
    """

    __slots__ = ("buffer_id", "dtype", "shape", "strides", "byte_offset", "owner", "_json")

    def __init__(
        self,
        buffer: str | Buffer,
        dtype: DTypeLike,
        shape: Sequence[int] | int,
        strides: Sequence[int] | None = None,
        byte_offset: int = 0,
    ) -> None:
        # Graphs make a Tensor per task: this path is kept short (no imports, no json.dumps).
        buffer_id = getattr(buffer, "id", None)
        self.owner: Buffer | None = buffer if buffer_id is not None else None  # type: ignore[assignment]
        self.buffer_id: str = buffer_id if buffer_id is not None else str(buffer)
        self.dtype: str = dtype if dtype.__class__ is str and dtype in DTYPE_SIZES else dtype_name(dtype)
        if shape.__class__ is int:
            self.shape: tuple[int, ...] = (shape,)
            dims = str(shape)
        else:
            self.shape = (_int(shape, "shape[0]"),) if isinstance(shape, (int, np.integer)) else _ints(shape, "shape")
            dims = ",".join(map(str, self.shape))
        self.strides: tuple[int, ...] | None = None if strides is None else _ints(strides, "strides")
        self.byte_offset: int = byte_offset if byte_offset.__class__ is int else _int(byte_offset, "byte_offset")
        head = _heads.get((self.buffer_id, self.dtype))
        if head is None:
            head = '{"buffer":' + encode_basestring(self.buffer_id) + ',"dtype":"' + self.dtype + '","shape":['
            if len(_heads) < 4096:
                _heads[(self.buffer_id, self.dtype)] = head
        text = head + dims + "]"
        if self.strides is not None:
            text += ',"strides":[' + ",".join(map(str, self.strides)) + "]"
        if self.byte_offset:
            text += ',"byte_offset":' + str(self.byte_offset)
        self._json = text + "}"

    @property
    def itemsize(self) -> int:
        return DTYPE_SIZES[self.dtype]

    def json(self) -> dict[str, Any]:
        """The tensor's JSON object as the control protocol spells it."""
        return json.loads(self._json)  # type: ignore[no-any-return]

    def numpy(self, writable: bool = True) -> np.ndarray[Any, Any]:
        """This view of the buffer's mapping as an ndarray (no copy); needs a Tensor made by Buffer.tensor."""
        if self.owner is None:
            raise ValueError("this Tensor was made from a buffer id; make it with Buffer.tensor to map it")
        return self.owner.view(self, writable=writable)

    def __repr__(self) -> str:
        return f"Tensor({self._json})"


class Arg:
    """One task argument, already encoded: a tagged tensor or a typed scalar."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def json(self) -> dict[str, Any]:
        return json.loads(self.text)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"Arg({self.text})"


def _tagged(t: Tensor, tag: str) -> Arg:
    if not isinstance(t, Tensor):
        raise TypeError(f"{tag}: expected a canopy.Tensor, got {type(t).__name__}")
    return Arg('{"tensor":' + t._json + ',"tag":"' + tag + '"}')


def In(t: Tensor) -> Arg:  # noqa: N802 - the tag names read as types in argument lists
    """A tensor the task reads (tag ``input``; needs the buffer's READ grant)."""
    return _tagged(t, "input")


def Out(t: Tensor) -> Arg:  # noqa: N802
    """A tensor the task writes (tag ``output``; needs WRITE)."""
    return _tagged(t, "output")


def InOut(t: Tensor) -> Arg:  # noqa: N802
    """A tensor the task reads and writes (tag ``inout``; needs READ and WRITE)."""
    return _tagged(t, "inout")


def _float_text(value: Any, kind: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{kind}: expected a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{kind}: {v} cannot be sent (JSON has no NaN or infinity)")
    return repr(v)


def f32(value: float) -> Arg:
    """A float32 scalar (the daemon rounds it to the nearest float; beyond float32's range is BAD_REQUEST)."""
    return Arg('{"scalar":{"float32":' + _float_text(value, "f32") + "}}")


def f64(value: float) -> Arg:
    """A float64 scalar."""
    return Arg('{"scalar":{"float64":' + _float_text(value, "f64") + "}}")


def i64(value: int) -> Arg:
    """An int64 scalar."""
    return Arg('{"scalar":{"int64":' + str(_int(value, "i64")) + "}}")


ArgLike = Union[Arg, int, float, "np.generic"]


def arg_text(a: Any, index: int) -> str:
    """The JSON text of a task argument: an Arg, or a plain number (int -> int64, float -> float64)."""
    cls = a.__class__
    if cls is Arg:
        return a.text  # type: ignore[no-any-return]
    if cls is int:
        return '{"scalar":{"int64":' + str(a) + "}}"
    if isinstance(a, Arg):
        return a.text
    if isinstance(a, Tensor):
        raise TypeError(f"args[{index}]: a Tensor needs a tag: In(t), Out(t) or InOut(t)")
    if isinstance(a, (np.float32, np.float16)):
        return f32(float(a)).text
    if isinstance(a, (float, np.floating)):
        return f64(float(a)).text
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        return i64(int(a)).text
    if isinstance(a, dict):
        return json.dumps(a, separators=(",", ":"))
    raise TypeError(f"args[{index}]: expected a tagged tensor, a scalar (f32, f64, i64) or a number, got {a!r}")
