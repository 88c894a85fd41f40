"""openpi's wire format: msgpack with numpy arrays and scalars as tagged maps (no pickle, ever).

An array travels as ``{b"__ndarray__": True, b"data": <raw bytes>, b"dtype": <dtype.str>, b"shape": [...]}``
and a numpy scalar as ``{b"__npgeneric__": True, b"data": <python value>, b"dtype": <dtype.str>}``; the tag
keys are msgpack *binary* strings, everything else is ordinary msgpack. This is what ``openpi_client``'s
``msgpack_numpy`` reads and writes, so either side can talk to the other.

Decoding is defensive because a server reads bytes from the network: object, void and complex dtypes are
refused (openpi's packer refuses to send them too), and the byte count must match dtype and shape.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

__all__ = ["WireError", "pack", "unpack"]

_ARRAY_TAG = b"__ndarray__"
_SCALAR_TAG = b"__npgeneric__"
_REFUSED_KINDS = ("O", "V", "c")  # object (pointers), void/structured, complex: what openpi refuses as well


class WireError(ValueError):
    """Bytes that are not a valid openpi message (bad msgpack, an array whose bytes do not fit its shape)."""


def _encode(obj: Any) -> Any:
    if isinstance(obj, (np.ndarray, np.generic)) and obj.dtype.kind in _REFUSED_KINDS:
        raise WireError(f"cannot send numpy dtype {obj.dtype} (object, structured and complex arrays are refused)")
    if isinstance(obj, np.ndarray):
        return {_ARRAY_TAG: True, b"data": obj.tobytes(), b"dtype": obj.dtype.str,
                b"shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        return {_SCALAR_TAG: True, b"data": obj.item(), b"dtype": obj.dtype.str}
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"cannot encode {type(obj).__name__} for the openpi wire format")


def _dtype(raw: Any) -> np.dtype:
    text = raw.decode() if isinstance(raw, bytes) else raw
    if not isinstance(text, str):
        raise WireError(f"array dtype must be a string, got {type(raw).__name__}")
    try:
        dtype = np.dtype(text)
    except TypeError as exc:
        raise WireError(f"unknown numpy dtype {text!r}") from exc
    if dtype.kind in _REFUSED_KINDS:
        raise WireError(f"refused numpy dtype {text!r} (object, structured and complex arrays are not accepted)")
    return dtype


def _decode(obj: dict[Any, Any]) -> Any:
    if _ARRAY_TAG in obj:
        dtype = _dtype(obj.get(b"dtype"))
        data, shape = obj.get(b"data"), obj.get(b"shape")
        if not isinstance(data, bytes) or not isinstance(shape, (list, tuple)):
            raise WireError("an __ndarray__ map needs binary 'data' and a list 'shape'")
        if not all(isinstance(side, int) and side >= 0 for side in shape):
            raise WireError(f"array shape must be non-negative integers, got {list(shape)}")
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if len(data) != expected:
            raise WireError(f"array of dtype {dtype.str} and shape {list(shape)} needs {expected} bytes, "
                            f"got {len(data)}")
        return np.frombuffer(data, dtype=dtype).reshape(shape)
    if _SCALAR_TAG in obj:
        dtype = _dtype(obj.get(b"dtype"))
        try:
            return dtype.type(obj.get(b"data"))
        except (TypeError, ValueError, OverflowError) as exc:
            raise WireError(f"bad numpy scalar of dtype {dtype.str}: {exc}") from exc
    return obj


def pack(obj: Any) -> bytes:
    """Encodes ``obj`` (dicts, lists, str, numbers, numpy arrays and scalars) as an openpi message."""
    return msgpack.packb(obj, default=_encode, use_bin_type=True)


def unpack(data: bytes) -> Any:
    """Decodes an openpi message; arrays come back read-only, backed by the message bytes."""
    try:
        return msgpack.unpackb(data, object_hook=_decode, raw=False)
    except WireError:
        raise
    except (msgpack.exceptions.ExtraData, msgpack.exceptions.FormatError, msgpack.exceptions.StackError,
            ValueError, TypeError) as exc:
        raise WireError(f"not a valid msgpack message: {type(exc).__name__}: {exc}") from exc
