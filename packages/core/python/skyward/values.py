"""Values beyond JSON across the boundary (see docs/protocol.md, _Values_): arrays, tables and any
other Python object.

- ``{"$a": {"dtype": "float32", "shape": [2, 3], "data": {"$b": i}}}`` — an n-dimensional array:
  its elements in C order, little-endian, as one binary segment (numpy arrays and CPU torch tensors
  are sent from their own memory, without a copy; they arrive as numpy arrays, or as a
  :class:`RawArray` when numpy is not installed).
- ``{"$t": {"format": "arrow", "kind": "pandas" | "arrow", "data": {"$b": i}}}`` — a table as an
  Arrow IPC stream (pandas DataFrames and pyarrow tables; ``kind`` says which it was made from and
  what it becomes again in Python).
- ``{"$o": {"type": "module.Qualname", "data": {"$b": i}}}`` — any other Python object, pickled
  (with cloudpickle when it is installed). It is unpickled only when a task runs with it (never
  while a frame is decoded), so only a client that passed the handshake can make a worker unpickle.

- ``{"$r": {"id": "…"}}`` — a remote reference: a result kept on its node (see :class:`Kept`). The
  client sends it as an argument; the worker puts the object it keeps under that id in its place
  (``{"$r": {"id": "…", "value": {"$o": …}}}`` brings the object along, for a node that does not
  hold it yet: the worker keeps it from then on). A worker sends ``{"$r": {"id", "node", "type",
  "size"}}`` for a result it keeps.

Nothing here imports numpy, pandas, pyarrow or cloudpickle unless such a value is met.
"""

from __future__ import annotations

import pickle
import sys
import threading
from typing import Any, Dict, List, Tuple

from .wire_errors import ProtocolError, SerializationError

#: Wire dtype name → (numpy dtype string, item size). Always little-endian on the wire.
DTYPES: Dict[str, Tuple[str, int]] = {
    "bool": ("|b1", 1),
    "int8": ("|i1", 1),
    "uint8": ("|u1", 1),
    "int16": ("<i2", 2),
    "uint16": ("<u2", 2),
    "int32": ("<i4", 4),
    "uint32": ("<u4", 4),
    "int64": ("<i8", 8),
    "uint64": ("<u8", 8),
    "float16": ("<f2", 2),
    "float32": ("<f4", 4),
    "float64": ("<f8", 8),
}
_MEMORYVIEW_FORMATS = {
    "bool": "?", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
    "int64": "q", "uint64": "Q", "float16": "e", "float32": "f", "float64": "d",
}


class Blob:
    """A binary segment given as any buffer: sent from that memory, without a copy."""

    __slots__ = ("view",)

    def __init__(self, buffer: Any) -> None:
        view = buffer if type(buffer) is memoryview else memoryview(buffer)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self.view = view

    def __len__(self) -> int:
        return len(self.view)

    def __reduce__(self) -> Any:
        # Across the process executor's link: as bytes (one copy, as any value there).
        return (Blob, (self.view.tobytes(),))


class RawArray:
    """An array received where numpy is not installed: ``dtype``, ``shape`` and its bytes ``data``
    (C order, little-endian). :meth:`view` gives a typed memoryview; sent back, it is an array again."""

    __slots__ = ("dtype", "shape", "data")

    def __init__(self, dtype: str, shape: List[int], data: bytearray) -> None:
        self.dtype = dtype
        self.shape = shape
        self.data = data

    def view(self) -> memoryview:
        """The elements as a memoryview of this shape."""
        view = memoryview(self.data)
        return view.cast(_MEMORYVIEW_FORMATS[self.dtype], self.shape) if len(self.data) else view

    def tolist(self) -> Any:
        return self.view().tolist()

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, RawArray) and other.dtype == self.dtype and other.shape == self.shape
                and other.data == self.data)

    def __repr__(self) -> str:
        return f"RawArray({self.dtype}, {self.shape})"


class Pickled:
    """An object received as ``$o``: its type name and its pickle, unpickled by :meth:`load`."""

    __slots__ = ("type_name", "data")

    def __init__(self, type_name: str, data: bytes) -> None:
        self.type_name = type_name
        self.data = data

    def load(self) -> Any:
        try:
            import cloudpickle  # noqa: F401  (registers what cloudpickled objects need)
        except ImportError:
            pass
        return pickle.loads(self.data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pickled) and other.type_name == self.type_name and other.data == self.data

    def __hash__(self) -> int:
        return hash((self.type_name, self.data))

    def __repr__(self) -> str:
        return f"<pickled {self.type_name}, {len(self.data)} bytes>"


class RefArg:
    """A ``$r`` argument as decoded: the id of an object kept on this node, and, when the client
    brings the object along for this node, its pickle (a :class:`Pickled`). The worker replaces it
    with the :class:`Kept` object it holds before the task runs."""

    __slots__ = ("id", "carried", "info")

    def __init__(self, ref_id: str, carried: "Pickled | None" = None, info: Dict[str, Any] | None = None) -> None:
        self.id = ref_id
        self.carried = carried
        #: its description (``id``, ``node``, ``type``, ``size``) when the message gave one
        self.info = info

    def __repr__(self) -> str:
        return f"<remote reference {self.id}{' (carried)' if self.carried is not None else ''}>"


_KEPT_LOAD = threading.Lock()


class Kept:
    """An object kept on this node for a remote reference: the live object (thread executor), or
    its pickle (what crossed from a process-executor child, or from another node). Handed to a task
    it is the object itself (:meth:`load`); across a process link it goes as its pickle."""

    __slots__ = ("type_name", "size", "value", "has_value", "data")

    def __init__(self, type_name: str, size: int, value: Any = None, has_value: bool = False,
                 data: bytes | None = None) -> None:
        self.type_name = type_name
        self.size = size
        self.value = value
        self.has_value = has_value
        self.data = data

    def load(self) -> Any:
        """The object: the live one, or unpickled once (then the live one; the pickle is let go)."""
        if not self.has_value:
            with _KEPT_LOAD:  # two tasks starting at once with it get the same object
                if not self.has_value:
                    self.value = Pickled(self.type_name, self.data or b"").load()
                    self.has_value = True
                    self.data = None
        return self.value

    def pickle(self) -> bytes:
        return self.data if self.data is not None else dumps(self.value)

    def __reduce__(self) -> Any:
        return (Kept, (self.type_name, self.size, None, False, self.pickle()))

    def __repr__(self) -> str:
        return f"<kept {self.type_name}, {self.size} bytes>"


class _CountingFile:
    """A file that only counts what is written to it."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        self.count += size
        return size


def _pickler_class() -> Any:
    try:
        import cloudpickle

        return cloudpickle.CloudPickler
    except ImportError:
        return pickle.Pickler


def dumps(value: Any) -> bytes:
    """``value``'s pickle: cloudpickle when installed, else ``pickle`` (the ``$o`` form)."""
    try:
        import cloudpickle

        return cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except ImportError:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def pickled_size(value: Any) -> int:
    """The size of ``value``'s pickle, measured without holding it (large buffers are counted,
    not copied). Raises what pickling raises."""
    counter = _CountingFile()
    _pickler_class()(counter, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return counter.count


def type_name(value: object) -> str:
    cls = type(value)
    module = cls.__module__
    if module in ("builtins", "__main__"):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


# -- encoding ---------------------------------------------------------------------------------------


def _root_module(value: object) -> str:
    return type(value).__module__.split(".", 1)[0]


def encode_special(value: Any, path: str) -> Any:
    """The wire form of an array, a table or any other object; raises ``SerializationError``."""
    if type(value) is RawArray:
        return {"$a": {"dtype": value.dtype, "shape": list(value.shape), "data": Blob(value.data)}}
    root = _root_module(value)
    if root == "numpy":
        if type(value).__name__ == "ndarray":
            return encode_array(value, path)
        item = getattr(value, "item", None)  # a numpy scalar: a plain number
        if callable(item) and getattr(value, "ndim", None) == 0:
            if type(value).__name__ == "MaskedConstant":
                return None  # a masked element is missing; its item() is 0.0, which would pass for a value
            if getattr(getattr(value, "dtype", None), "kind", None) in ("M", "m"):
                # As their arrays: a datetime64[ns]'s item() is a count of nanoseconds, not a time.
                return encode_object(value, path)
            plain = item()
            # A long double's item() is itself (no Python number holds it): pickled, not sent again.
            return encode_object(value, path) if type(plain) is type(value) else plain
    if root == "torch" and type(value).__name__ in ("Tensor", "Parameter"):
        return encode_tensor(value, path)
    if root in ("jax", "jaxlib") and type(value).__name__ in ("ArrayImpl", "Array"):
        return encode_jax_array(value, path)
    if root == "pandas" and type(value).__name__ == "DataFrame":
        return encode_table(value, "pandas", path)
    if root == "pyarrow" and type(value).__name__ in ("Table", "RecordBatch"):
        return encode_table(value, "arrow", path)
    return encode_object(value, path)


def _wire_dtype(dtype: Any) -> str | None:
    """The wire dtype name of a numpy dtype (``None`` for kinds the wire has no name for)."""
    size = dtype.itemsize
    return {"b": "bool", "i": f"int{size * 8}", "u": f"uint{size * 8}", "f": f"float{size * 8}"}.get(dtype.kind)


def encode_tensor(tensor: Any, path: str) -> Any:
    """A CPU tensor without grad as an array; any other (on an accelerator, with grad, or of elements
    the wire has no dtype for: bfloat16, complex, quantized, sparse) pickled, as the tensor."""
    if getattr(tensor, "device", None) is not None and tensor.device.type == "cpu" and not tensor.requires_grad:
        try:
            array = tensor.numpy()
        except (TypeError, RuntimeError):  # numpy has no such elements or layout, or a conjugate bit is set
            array = None
        if array is not None and _wire_dtype(array.dtype) in DTYPES:
            return encode_array(array, path)
    # A tensor's pickle leaves out its lazy conjugate and negative bits (the values come back
    # conjugated): they are applied first.
    if callable(getattr(tensor, "is_conj", None)) and tensor.is_conj():
        tensor = tensor.resolve_conj()
    if callable(getattr(tensor, "is_neg", None)) and tensor.is_neg():
        tensor = tensor.resolve_neg()
    return encode_object(tensor, path)


def encode_jax_array(array: Any, path: str) -> Any:
    """A JAX array held in host memory (its devices are CPUs) as an array (``numpy.asarray`` of it
    is a view, no copy); one on an accelerator, spread over several processes or of elements the
    wire has no dtype for (bfloat16) pickled, as the array (as a torch tensor on an accelerator)."""
    try:
        on_host = array.is_fully_addressable and all(device.platform == "cpu" for device in array.devices())
    except Exception:  # a tracer, a deleted array: whatever pickling makes of it
        on_host = False
    if on_host and _wire_dtype(array.dtype) in DTYPES:
        import numpy

        return encode_array(numpy.asarray(array), path)
    return encode_object(array, path)


def encode_array(array: Any, path: str) -> Any:
    name = _wire_dtype(array.dtype)
    if name not in DTYPES:
        return encode_object(array, path)  # objects, strings, datetimes, complex, long double: pickled
    import numpy

    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    if not array.flags.c_contiguous:
        array = array.copy(order="C")  # no copy when it is C-contiguous already
    return {"$a": {"dtype": name, "shape": list(array.shape), "data": Blob(array.reshape(-1).view(numpy.uint8))}}


def encode_table(table: Any, kind: str, path: str) -> Any:
    try:
        import pyarrow
    except ImportError:
        raise SerializationError(
            path, type_name(table), "sending a table needs pyarrow on the worker (pip install pyarrow)"
        ) from None
    if kind == "pandas":
        table = pyarrow.Table.from_pandas(table, preserve_index=False)
    elif type(table).__name__ == "RecordBatch":
        table = pyarrow.Table.from_batches([table])
    sink = pyarrow.BufferOutputStream()
    with pyarrow.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return {"$t": {"format": "arrow", "kind": kind, "data": Blob(sink.getvalue())}}


def encode_object(value: Any, path: str) -> Any:
    try:
        import cloudpickle

        data = cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except ImportError:
        try:
            data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as error:
            raise SerializationError(path, type_name(value), f"cannot send a value of type {type_name(value)}: {error}") from None
    except Exception as error:
        raise SerializationError(path, type_name(value), f"cannot send a value of type {type_name(value)}: {error}") from None
    return {"$o": {"type": type_name(value), "data": data}}


# -- decoding ---------------------------------------------------------------------------------------


def decode_array(content: Any, resolve_segment: Any) -> Any:
    if type(content) is not dict or set(content) != {"dtype", "shape", "data"}:
        raise ProtocolError('$a must hold {"dtype", "shape", "data"}')
    dtype, shape = content["dtype"], content["shape"]
    if dtype not in DTYPES:
        raise ProtocolError(f"$a dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if type(shape) is not list or any(type(n) is not int or n < 0 for n in shape):
        raise ProtocolError("$a shape must be a list of non-negative integers")
    data = resolve_segment(content["data"])
    count = 1
    for n in shape:
        count *= n
    if len(data) != count * DTYPES[dtype][1]:
        raise ProtocolError(f"$a of shape {shape} and dtype {dtype} needs {count * DTYPES[dtype][1]} bytes, not {len(data)}")
    numpy = sys.modules.get("numpy")
    if numpy is None:
        try:
            import numpy  # type: ignore[no-redef]
        except ImportError:
            return RawArray(dtype, list(shape), data)
    return numpy.frombuffer(data, dtype=numpy.dtype(DTYPES[dtype][0])).reshape(shape)


class UnreadTable:
    """A table (``$t``) this worker could not read: pyarrow (or pandas) missing, or a stream Arrow
    refuses. The task it is given to fails naming why (:func:`restore` raises); raising while the
    frame was decoded closed the connection instead, losing the node for a missing package."""

    __slots__ = ("kind", "data", "reason")

    def __init__(self, kind: str, data: bytes, reason: str) -> None:
        self.kind = kind
        self.data = data
        self.reason = reason

    def load(self) -> Any:
        raise ValueError(self.reason)

    def __repr__(self) -> str:
        return f"<unread table: {self.reason}>"


def decode_table(content: Any, resolve_segment: Any) -> Any:
    if type(content) is not dict or content.get("format") != "arrow" or content.get("kind") not in ("pandas", "arrow"):
        raise ProtocolError('$t must hold {"format": "arrow", "kind": "pandas" | "arrow", "data"}')
    kind = content["kind"]
    data = resolve_segment(content.get("data"))
    try:
        import pyarrow
    except ImportError:
        return UnreadTable(kind, bytes(data), "a table arrived but pyarrow is not installed on this worker (pip install pyarrow)")
    try:
        table = pyarrow.ipc.open_stream(pyarrow.py_buffer(data)).read_all()
        return table.to_pandas() if kind == "pandas" else table
    except Exception as error:  # a stream Arrow refuses; pandas missing for to_pandas
        return UnreadTable(kind, bytes(data), f"a table arrived that this worker cannot read: {type(error).__name__}: {error}")


def decode_object(content: Any, resolve_segment: Any) -> Pickled:
    if type(content) is not dict or type(content.get("type")) is not str:
        raise ProtocolError('$o must hold {"type": "module.Qualname", "data": {"$b": i}}')
    data = resolve_segment(content.get("data"))
    return Pickled(content["type"], bytes(data))


_REF_KEYS = {"id", "node", "type", "size", "value"}


def decode_ref(content: Any, resolve_value: Any) -> RefArg:
    if (type(content) is not dict or type(content.get("id")) is not str or type(content.get("node")) is not int
            or type(content.get("type")) is not str or type(content.get("size")) is not int
            or not set(content) <= _REF_KEYS):
        raise ProtocolError('$r must hold {"id", "node", "type", "size"}, and "value": {"$o": …} when it brings the object')
    info = {key: content[key] for key in ("id", "node", "type", "size")}
    carried = None
    if "value" in content:
        carried = resolve_value(content["value"])
        if type(carried) is not Pickled:
            raise ProtocolError('the value a $r brings along must be an object {"$o": …}')
    return RefArg(content["id"], carried, info)


_RESTORED = (Pickled, Kept, UnreadTable, list, dict)


def restore(value: Any) -> Any:
    """``value`` with every :class:`Pickled` in it unpickled and every :class:`Kept` replaced by its
    object (containers copied only where one is)."""
    cls = type(value)
    if cls is Pickled or cls is Kept or cls is UnreadTable:
        return value.load()
    if cls is RefArg:
        raise SerializationError("args", "RefArg", f"remote reference {value.id} was not resolved on this node")
    if cls is list:
        out: List[Any] | None = None
        for index, item in enumerate(value):
            kind = type(item)
            if kind in _RESTORED or kind is RefArg:
                restored = restore(item)
                if restored is not item:
                    if out is None:
                        out = list(value)
                    out[index] = restored
        return value if out is None else out
    if cls is dict:
        changed: Dict[str, Any] | None = None
        for key, item in value.items():
            kind = type(item)
            if kind in _RESTORED or kind is RefArg:
                restored = restore(item)
                if restored is not item:
                    if changed is None:
                        changed = dict(value)
                    changed[key] = restored
        return value if changed is None else changed
    return value


__all__ = ["Blob", "DTYPES", "Kept", "Pickled", "RawArray", "RefArg", "UnreadTable", "encode_special", "pickled_size", "restore"]
