"""canopy: the Python client of the canopy task daemon (docs/python.md).

import canopy
with canopy.connect() as c, c.create_buffer(4096) as buf:
    x = buf.tensor("float32", 1024)
    c.submit("fill", "chip0", canopy.Out(x), canopy.f32(1.5)).result()
    print(buf.numpy("float32")[:4])        # the task's output, read through the buffer's own mapping
"""

from .buffer import Buffer, FdGrant, Mapping
from .client import DEFAULT_SOCKET, Client, connect
from .errors import (
    AccessDenied,
    BadRequest,
    CanopyError,
    Cancelled,
    DependencyFailed,
    InvalidDescriptor,
    InvalidTensor,
    KernelFailed,
    NoConsumer,
    OverlappingWrites,
    PeOutOfRange,
    StaleBuffer,
    Timeout,
    Unauthorized,
    UnknownBuffer,
    UnknownKernel,
    UnknownWorker,
    Unreachable,
    UnreachableBuffer,
    WorkerDied,
)
from .futures import GraphFuture, GraphResult, TaskFuture
from .graph import Graph
from .tensor import DTYPE_SIZES, Arg, In, InOut, Out, Tensor, f32, f64, i64
from .types import BufferInfo, ErrorInfo, ModuleInfo, TaskState

__version__ = "0.1.0"

__all__ = [
    "AccessDenied",
    "Arg",
    "BadRequest",
    "Buffer",
    "BufferInfo",
    "CanopyError",
    "Cancelled",
    "Client",
    "DEFAULT_SOCKET",
    "DTYPE_SIZES",
    "DependencyFailed",
    "ErrorInfo",
    "FdGrant",
    "Graph",
    "GraphFuture",
    "GraphResult",
    "In",
    "InOut",
    "InvalidDescriptor",
    "InvalidTensor",
    "KernelFailed",
    "Mapping",
    "ModuleInfo",
    "NoConsumer",
    "Out",
    "OverlappingWrites",
    "PeOutOfRange",
    "StaleBuffer",
    "TaskFuture",
    "TaskState",
    "Tensor",
    "Timeout",
    "Unauthorized",
    "UnknownBuffer",
    "UnknownKernel",
    "UnknownWorker",
    "Unreachable",
    "UnreachableBuffer",
    "WorkerDied",
    "connect",
    "f32",
    "f64",
    "i64",
]
