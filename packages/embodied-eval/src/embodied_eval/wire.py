"""openpi's wire format: msgpack with numpy arrays and scalars as tagged maps (no pickle, ever).

An array travels as ``{b"__ndarray__": True, b"data": <raw bytes>, b"dtype": <dtype.str>, b"shape": [...]}``
and a numpy scalar as ``{b"__npgeneric__": True, b"data": <python value>, b"dtype": <dtype.str>}``; the tag
keys are msgpack *binary* strings, everything else is ordinary msgpack. This is what ``openpi_client``'s
``msgpack_numpy`` reads and writes, so either side can talk to the other.

Decoding is defensive because a server reads bytes from the network: object, void and complex dtypes are
refused (openpi's packer refuses to send them too), the byte count must match dtype and shape (computed exactly,
so a declared 2**64-element array cannot wrap around to a small size), and :class:`WireLimits` bounds what one
message may unfold into (nesting depth, entries per map or list, string and extension sizes) before any of it
is built, so a small message cannot become a large or deep object.
"""

from __future__ import annotations

import math
import re
from typing import Any

import attrs
import msgpack
import numpy as np

__all__ = ["WireError", "WireLimits", "pack", "unpack"]

_ARRAY_TAG = b"__ndarray__"
_SCALAR_TAG = b"__npgeneric__"
_REFUSED_KINDS = ("O", "V", "c")  # object (pointers), void/structured, complex: what openpi refuses as well


class WireError(ValueError):
    """Bytes that are not a valid openpi message (bad msgpack, an array whose bytes do not fit its shape)."""


@attrs.frozen
class WireLimits:
    """What one decoded message may hold; the defaults are far above any robot observation or policy answer.

    Attributes:
        max_depth: nesting of maps and lists (openpi's ALOHA observations nest 2 deep; a tagged array adds 1).
        max_entries: entries of one map, items of one list (msgpack refuses a longer header before allocating).
        max_str_bytes: bytes of one text string (task instructions, key names).
        max_dims: dimensions of one array (numpy's own limit is 64).
    """

    max_depth: int = 16
    max_entries: int = 4096
    max_str_bytes: int = 1 << 20
    max_dims: int = 32


DEFAULT_LIMITS = WireLimits()


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


_DTYPE_TEXT = re.compile(r"[<>|=]?[A-Za-z?][A-Za-z0-9\[\]]{0,15}")
"""What ``dtype.str`` of a plain array looks like (``<f4``, ``|u1``, ``<M8[ns]``): no commas or parentheses, which
would make numpy parse a structured dtype (with ``ast.literal_eval``, raising SyntaxError on garbage)."""


def _dtype(raw: Any) -> np.dtype:
    try:
        text = raw.decode() if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise WireError("array dtype is not UTF-8 text") from None
    if not isinstance(text, str):
        raise WireError(f"array dtype must be a string, got {type(raw).__name__}")
    if not _DTYPE_TEXT.fullmatch(text):
        raise WireError(f"unknown numpy dtype {text[:40]!r} (plain dtypes only, e.g. '<f4', '|u1')")
    try:
        dtype = np.dtype(text)
    except Exception as exc:  # numpy raises TypeError, ValueError or SyntaxError depending on the text
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
        if not all(isinstance(side, int) and not isinstance(side, bool) and side >= 0 for side in shape):
            raise WireError(f"array shape must be non-negative integers, got {list(shape)[:8]}")
        if len(shape) > DEFAULT_LIMITS.max_dims:
            raise WireError(f"array has {len(shape)} dimensions; at most {DEFAULT_LIMITS.max_dims} are accepted")
        if dtype.itemsize == 0:
            raise WireError(f"array dtype {dtype.str} has no size (give strings a length, e.g. <U8)")
        expected = math.prod(shape) * dtype.itemsize  # Python ints: exact for any declared shape
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


def _check_depth(obj: Any, max_depth: int) -> None:
    """WireError when maps/lists nest deeper than ``max_depth`` (iterative: no recursion limit to hit)."""
    stack = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise WireError(f"message nests maps/lists {depth}+ levels deep; at most {max_depth} are accepted")
        stack.extend((child, depth + 1) for child in children)


def unpack(data: bytes, *, limits: WireLimits = DEFAULT_LIMITS) -> Any:
    """Decodes an openpi message; arrays come back read-only, backed by the message bytes.

    Raises:
        WireError: not msgpack, a refused or inconsistent array, or beyond ``limits``.
    """
    try:
        decoded = msgpack.unpackb(data, object_hook=_decode, raw=False, max_str_len=limits.max_str_bytes,
                                  max_array_len=limits.max_entries, max_map_len=limits.max_entries,
                                  max_bin_len=len(data), max_ext_len=0)
    except WireError:
        raise
    except (msgpack.exceptions.ExtraData, msgpack.exceptions.FormatError, msgpack.exceptions.StackError,
            ValueError, TypeError) as exc:
        raise WireError(f"not a valid msgpack message: {type(exc).__name__}: {str(exc)[:200]}") from exc
    _check_depth(decoded, limits.max_depth)
    return decoded
