"""The tensors of a batch structure, walked and rebuilt in one fixed order (the worker -> trainer transport).

Dicts (keeping their own subclass), lists, plain tuples, dataclasses and attrs instances are walked; their tensor
leaves (and :class:`InlineArray` leaves, small tensors in transit) are visited in the same order by
:func:`map_leaves` and :func:`iter_leaves`, so a position found on one side of a pickle names the same leaf on the
other. Anything else (strings, numbers, named tuples) is passed through as it is.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import numpy as np
import torch

__all__ = ["InlineArray", "iter_leaves", "map_leaves"]


class InlineArray:
    """A small tensor in transit, as a NumPy array (pickled by value)."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __reduce__(self) -> tuple[Any, ...]:
        return (InlineArray, (self.array,))


def _field_names(obj: Any) -> list[str] | None:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [f.name for f in dataclasses.fields(obj)]
    if attrs.has(type(obj)):
        return [f.name for f in attrs.fields(type(obj))]
    return None


def _is_plain_tuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and not hasattr(obj, "_fields")


def map_leaves(obj: Any, fn: Callable[[Any], Any]) -> Any:
    """``obj`` rebuilt with ``fn`` applied to each tensor and :class:`InlineArray` leaf (frozen classes too)."""
    if isinstance(obj, (torch.Tensor, InlineArray)):
        return fn(obj)
    if isinstance(obj, dict):
        out = copy.copy(obj)  # keeps the batch's own dict subclass (e.g. TensorBatch)
        for key, value in obj.items():
            out[key] = map_leaves(value, fn)
        return out
    if isinstance(obj, list):
        return [map_leaves(value, fn) for value in obj]
    if _is_plain_tuple(obj):
        return tuple(map_leaves(value, fn) for value in obj)
    names = _field_names(obj)
    if names is None:
        return obj
    out = copy.copy(obj)
    for name in names:
        object.__setattr__(out, name, map_leaves(getattr(obj, name), fn))
    return out


def iter_leaves(obj: Any) -> Iterator[Any]:
    """The leaves :func:`map_leaves` visits, in its order."""
    if isinstance(obj, (torch.Tensor, InlineArray)):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from iter_leaves(value)
    elif isinstance(obj, list) or _is_plain_tuple(obj):
        for value in obj:
            yield from iter_leaves(value)
    else:
        for name in _field_names(obj) or ():
            yield from iter_leaves(getattr(obj, name))
