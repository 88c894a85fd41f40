"""Index samplers (group ``embodied.samplers``): how one epoch's index order is split over ranks.

A sampler factory takes ``(rank, world_size)`` and returns a function mapping the epoch's global order to
this rank's share. Every rank gets the same number of indices (the tail that does not divide evenly is
dropped), so collective operations stay in step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["block_sampler", "cyclic_sampler"]

ShareFn = Callable[[Sequence[int]], list[int]]


def cyclic_sampler(rank: int, world_size: int) -> ShareFn:
    """Rank r takes positions r, r + W, r + 2W, ... of the epoch's order (like DistributedSampler)."""

    def share(order: Sequence[int]) -> list[int]:
        per_rank = len(order) // world_size
        return list(order[rank : per_rank * world_size : world_size])

    return share


def block_sampler(rank: int, world_size: int) -> ShareFn:
    """Rank r takes the r-th contiguous block of the epoch's order (better locality for video decoding)."""

    def share(order: Sequence[int]) -> list[int]:
        per_rank = len(order) // world_size
        return list(order[rank * per_rank : (rank + 1) * per_rank])

    return share
