"""Reuse of the shared-memory segments that carry large batch tensors from DataLoader workers to the trainer.

A worker stacks each large batch tensor straight into a shared-memory segment (``model_api._stack``), which the
main process then maps. A fresh segment costs more than the copy into it: tmpfs allocates and zero-fills every
page, and the main process frees the pages again when it drops the batch (``benchmarks/batch_transfer.py``: a
63 MiB batch of 9-frame 640x480 windows took 75 ms in a fresh segment, 20.5 ms in a reused one). At 2 workers that
was about a quarter of a video-window pass's CPU time.

So each worker keeps a few segments (:class:`SegmentPool`, at most ``POOL_SLOTS`` and ``POOL_MAX_BYTES``) and
reuses one only after the main process has dropped every tensor on it:

- the batch travels wrapped in a :class:`PooledBatch` that names, for each pooled segment it carries, the
  segment's slot and a token new for this send;
- the main process (:class:`SegmentReleases`) watches each such segment through a weak reference to its storage
  and, once the storage is gone (no tensor, view or NumPy array on it is left), writes the token into a small
  table it shares with its workers;
- a worker hands a slot out again only when the table holds the token of that slot's last send.

A segment is therefore never written while anything in the main process can still read it. Batches a user keeps
pin their segments; the worker then allocates fresh ones, as it always did. A pooled segment a collate function
made but did not return is dropped from the pool (the worker may still hold it elsewhere). The pool is only used
with torch's default ``file_descriptor`` sharing strategy, and :class:`~embodied_core.data.loader.ResumableLoader`
turns it off with ``keep_batch_memory=False``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.multiprocessing
import torch.utils.data
from torch.multiprocessing.reductions import StorageWeakRef

from embodied_core.data.leaves import iter_leaves, map_leaves

__all__ = ["POOL_MAX_BYTES", "POOL_SLOTS", "PooledBatch", "SegmentPool", "SegmentReleases", "install_worker_pool",
           "shared_empty", "worker_pool"]

POOL_SLOTS = 16
"""Segments a worker keeps at most (a batch uses one per large tensor; a few batches are in flight at once)."""
POOL_MAX_BYTES = 1 << 30
"""Bytes of segments a worker keeps at most (1 GiB); a larger request gets an unpooled segment."""

_pool: SegmentPool | None = None


class _Slot:
    """One pooled segment and the token of its last send (0: never sent, or free again)."""

    __slots__ = ("storage", "token")

    def __init__(self, storage: torch.UntypedStorage) -> None:
        self.storage = storage
        self.token = 0


class SegmentPool:
    """A worker's pooled shared-memory segments.

    Args:
        worker_id: the DataLoader worker's id (its row of the release table).
        releases: this worker's row of the table :class:`SegmentReleases` writes (``[slots]`` int64, shared).
        max_bytes: bytes of segments kept at most.
    """

    def __init__(self, worker_id: int, releases: np.ndarray, *, max_bytes: int = POOL_MAX_BYTES) -> None:
        self.worker_id = worker_id
        self._releases = releases
        self._slots: list[_Slot | None] = [None] * len(releases)
        self._leased: dict[int, int] = {}  # storage data_ptr -> slot, handed out since the last dispatch
        self._last_token = 0
        self.max_bytes = max_bytes

    def _returned(self, index: int) -> bool:
        slot = self._slots[index]
        return (slot is not None and index not in self._leased.values()
                and (slot.token == 0 or int(self._releases[index]) == slot.token))

    def storage(self, nbytes: int) -> torch.UntypedStorage:
        """A shared storage of at least ``nbytes``: a returned pooled one that fits (at most twice the size), a new
        pooled one, or, when the pool is full of segments still in use, a fresh unpooled one."""
        free = [i for i in range(len(self._slots)) if self._returned(i)]
        fitting = [i for i in free if nbytes <= self._slots[i].storage.nbytes() <= 2 * nbytes]  # type: ignore[union-attr]
        if fitting:
            index = min(fitting, key=lambda i: self._slots[i].storage.nbytes())  # type: ignore[union-attr]
        else:
            candidates = [i for i, slot in enumerate(self._slots) if slot is None] + free
            if not candidates:
                return torch.UntypedStorage._new_shared(nbytes)
            index = candidates[0]
            self._slots[index] = None  # an evicted segment is freed before the new one is made
            kept = sum(slot.storage.nbytes() for slot in self._slots if slot is not None)
            if kept + nbytes > self.max_bytes:
                return torch.UntypedStorage._new_shared(nbytes)
            self._slots[index] = _Slot(torch.UntypedStorage._new_shared(nbytes))
        storage = self._slots[index].storage  # type: ignore[union-attr]
        self._leased[storage.data_ptr()] = index
        return storage

    def dispatch(self, batch: Any) -> list[tuple[int, int, int]]:
        """``(leaf position, slot, token)`` for each pooled segment the (packed) ``batch`` carries, in
        :func:`~embodied_core.data.transport.iter_leaves` order; the slots handed out since the last dispatch that
        the batch does not carry leave the pool."""
        sent: list[tuple[int, int, int]] = []
        carried: set[int] = set()
        for position, leaf in enumerate(iter_leaves(batch)):
            if not isinstance(leaf, torch.Tensor):
                continue
            pointer = leaf.untyped_storage().data_ptr()
            index = self._leased.get(pointer)
            if index is None or pointer in carried:
                continue
            carried.add(pointer)
            self._last_token += 1
            self._slots[index].token = self._last_token  # type: ignore[union-attr]
            sent.append((position, index, self._last_token))
        for pointer, index in self._leased.items():
            if pointer not in carried:
                self._slots[index] = None
        self._leased.clear()
        return sent


class PooledBatch:
    """A batch in transit with the pooled segments it carries; rebuilt in the main process with a weak reference
    to each segment's storage (:class:`SegmentReleases` unwraps it)."""

    __slots__ = ("batch", "sent", "watched", "worker_id")

    def __init__(self, batch: Any, worker_id: int, sent: Sequence[tuple[int, int, int]],
                 watched: list[tuple[int, int, int, StorageWeakRef]] | None = None) -> None:
        self.batch = batch
        self.worker_id = worker_id
        self.sent = list(sent)
        self.watched = watched or []

    def __reduce__(self) -> tuple[Any, ...]:
        return (_arrived, (self.batch, self.worker_id, self.sent))

    def pin_memory(self) -> PooledBatch:
        """The DataLoader's pin-memory thread: the batch's tensors pinned; the segments stay watched."""
        pinned = map_leaves(self.batch, lambda leaf: leaf.pin_memory() if isinstance(leaf, torch.Tensor) else leaf)
        return PooledBatch(pinned, self.worker_id, self.sent, self.watched)


def _arrived(batch: Any, worker_id: int, sent: list[tuple[int, int, int]]) -> PooledBatch:
    leaves = list(iter_leaves(batch))
    watched = [(worker_id, slot, token, StorageWeakRef(leaves[position].untyped_storage()))
               for position, slot, token in sent]
    return PooledBatch(batch, worker_id, sent, watched)


class SegmentReleases:
    """The main process's side: the release table shared with ``num_workers`` workers, and the pooled segments of
    received batches that are still alive here."""

    def __init__(self, num_workers: int) -> None:
        self.table = torch.zeros((num_workers, POOL_SLOTS), dtype=torch.int64).share_memory_()
        self._view = self.table.numpy()
        self._watched: list[tuple[int, int, int, StorageWeakRef]] = []

    def receive(self, batch: Any) -> Any:
        """The batch itself; a :class:`PooledBatch`'s segments are watched from now on."""
        if isinstance(batch, PooledBatch):
            self._watched.extend(batch.watched)
            return batch.batch
        return batch

    def release_expired(self) -> int:
        """Hands the segments nothing here uses any more back to their workers; returns how many."""
        alive = []
        for entry in self._watched:
            worker_id, slot, token, ref = entry
            if ref.expired():
                self._view[worker_id, slot] = token
            else:
                alive.append(entry)
        released = len(self._watched) - len(alive)
        self._watched = alive
        return released


def install_worker_pool(worker_id: int, table: torch.Tensor) -> bool:
    """Gives this DataLoader worker a :class:`SegmentPool` on its row of ``table``; False (no pool) unless torch
    shares tensors by file descriptor."""
    global _pool
    if torch.multiprocessing.get_sharing_strategy() != "file_descriptor":
        _pool = None
        return False
    _pool = SegmentPool(worker_id, table.numpy()[worker_id])
    return True


def worker_pool() -> SegmentPool | None:
    """This worker's pool (None in the main process and where no pool was installed)."""
    return _pool if torch.utils.data.get_worker_info() is not None else None


def shared_empty(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialized contiguous tensor in shared memory: on a pooled segment in a worker with a pool."""
    nbytes = math.prod(shape) * dtype.itemsize
    pool = worker_pool()
    storage = pool.storage(nbytes) if pool is not None else torch.UntypedStorage._new_shared(nbytes)
    return torch.empty(0, dtype=dtype).set_(storage, 0, tuple(shape))
