"""Cheaper worker -> trainer transport of batches with many small tensors.

A DataLoader worker hands every tensor of a batch to the main process through its own shared-memory segment
(a file descriptor passed over a socket, then mapped): ~0.1 ms per tensor, whatever its size. Robot batches
carry a dozen small tensors (state windows, pad masks, indices, timestamps) next to a few large frames, so
that fixed cost dominated; small tensors now travel pickled inside the batch (as NumPy arrays) and become
tensors again in the main process, while large ones keep the shared-memory path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from embodied_core.data import segment_pool
from embodied_core.data.leaves import InlineArray, map_leaves
from embodied_core.data.worker_errors import WorkerFailure, in_worker
from embodied_core.errors import EmbodiedError

__all__ = ["INLINE_MAX_BYTES", "PackingCollate", "pack_small_tensors", "unpack_small_tensors"]

INLINE_MAX_BYTES = 64 * 1024
"""Tensors up to this size are pickled with the batch; larger ones go through shared memory."""

_NUMPY_SAFE = {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
               torch.float32, torch.float64}


def _pack(leaf: Any) -> Any:
    if (isinstance(leaf, torch.Tensor) and leaf.device.type == "cpu" and leaf.dtype in _NUMPY_SAFE
            and not leaf.requires_grad and leaf.numel() * leaf.element_size() <= INLINE_MAX_BYTES):
        return InlineArray(leaf.numpy())
    return leaf


def _unpack(leaf: Any) -> Any:
    return torch.from_numpy(leaf.array) if isinstance(leaf, InlineArray) else leaf


def pack_small_tensors(batch: Any) -> Any:
    """The batch with its small CPU tensors replaced by picklable arrays (run in the worker)."""
    return map_leaves(batch, _pack)


def unpack_small_tensors(batch: Any) -> Any:
    """Inverse of :func:`pack_small_tensors` (run in the main process; zero-copy)."""
    return map_leaves(batch, _unpack)


class PackingCollate:
    """``collate_fn`` followed by :func:`pack_small_tensors`; picklable for spawn/forkserver workers. In a worker
    with a segment pool (:mod:`embodied_core.data.segment_pool`), a batch on pooled segments travels as a
    :class:`~embodied_core.data.segment_pool.PooledBatch`.

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
        packed = pack_small_tensors(batch)
        pool = segment_pool.worker_pool()
        sent = pool.dispatch(packed) if pool is not None else []
        return segment_pool.PooledBatch(packed, pool.worker_id, sent) if sent and pool is not None else packed
