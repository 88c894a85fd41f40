"""Cheaper worker -> trainer transport of batches with many small tensors.

A DataLoader worker hands every tensor of a batch to the main process through its own shared-memory segment
(a file descriptor passed over a socket, then mapped): ~0.1 ms per tensor, whatever its size. Robot batches
carry a dozen small tensors (state windows, pad masks, indices, timestamps) next to a few large frames, so
that fixed cost dominated; small tensors now travel pickled inside the batch (as NumPy arrays) and become
tensors again in the main process, while large ones keep the shared-memory path.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
import torch

from embodied_core.data.worker_errors import WorkerFailure, in_worker
from embodied_core.errors import EmbodiedError

__all__ = ["INLINE_MAX_BYTES", "PackingCollate", "pack_small_tensors", "unpack_small_tensors"]

INLINE_MAX_BYTES = 64 * 1024
"""Tensors up to this size are pickled with the batch; larger ones go through shared memory."""

_NUMPY_SAFE = {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
               torch.float32, torch.float64}


class _Inline:
    """A small tensor in transit, as a NumPy array (pickled by value)."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Inline, (self.array,))


def _map(obj: Any, fn: Callable[[Any], Any]) -> Any:
    """Applies ``fn`` to the leaves of dicts, lists, tuples, dataclasses and attrs instances."""
    if isinstance(obj, (torch.Tensor, _Inline)):
        return fn(obj)
    if isinstance(obj, dict):
        out = copy.copy(obj)  # keeps the batch's own dict subclass (e.g. TensorBatch)
        for key, value in obj.items():
            out[key] = _map(value, fn)
        return out
    if isinstance(obj, list):
        return [_map(value, fn) for value in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_map(value, fn) for value in obj)
    names = ([f.name for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) and not isinstance(obj, type)
             else [f.name for f in attrs.fields(type(obj))] if attrs.has(type(obj)) else None)
    if names is None:
        return obj
    out = copy.copy(obj)
    for name in names:
        object.__setattr__(out, name, _map(getattr(obj, name), fn))  # also for frozen classes
    return out


def _pack(leaf: Any) -> Any:
    if (isinstance(leaf, torch.Tensor) and leaf.device.type == "cpu" and leaf.dtype in _NUMPY_SAFE
            and not leaf.requires_grad and leaf.numel() * leaf.element_size() <= INLINE_MAX_BYTES):
        return _Inline(leaf.numpy())
    return leaf


def _unpack(leaf: Any) -> Any:
    return torch.from_numpy(leaf.array) if isinstance(leaf, _Inline) else leaf


def pack_small_tensors(batch: Any) -> Any:
    """The batch with its small CPU tensors replaced by picklable arrays (run in the worker)."""
    return _map(batch, _pack)


def unpack_small_tensors(batch: Any) -> Any:
    """Inverse of :func:`pack_small_tensors` (run in the main process; zero-copy)."""
    return _map(batch, _unpack)


class PackingCollate:
    """``collate_fn`` followed by :func:`pack_small_tensors`; picklable for spawn/forkserver workers.

    A :class:`WorkerFailure` among the samples (or an :class:`EmbodiedError` of ``collate_fn`` in a worker) is
    passed on as the batch, for the loader to re-raise in the main process.
    """

    def __init__(self, collate_fn: Callable[[Sequence[Any]], Any]) -> None:
        self.collate_fn = collate_fn

    def __call__(self, samples: Sequence[Any] | WorkerFailure) -> Any:
        if isinstance(samples, WorkerFailure):
            return samples
        failure = next((s for s in samples if isinstance(s, WorkerFailure)), None)
        if failure is not None:
            return failure
        try:
            batch = self.collate_fn(samples)
        except EmbodiedError as exc:
            if not in_worker():
                raise
            return WorkerFailure(exc)
        return pack_small_tensors(batch)
