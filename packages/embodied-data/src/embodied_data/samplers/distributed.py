"""``distributed``: ``torch.utils.data.DistributedSampler``'s split (DreamZero's ``sampler_type=distributed``).

The order is padded to a multiple of the world size by repeating its head (no index is dropped; a few are read
twice), then rank r takes positions r, r + W, r + 2W, ...; core's ``cyclic`` drops the tail instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from embodied_core.errors import UsageError

__all__ = ["distributed_sampler"]

ShareFn = Callable[[Sequence[int]], list[int]]


def check_rank(rank: int, world_size: int) -> None:
    """A UsageError unless ``0 <= rank < world_size``."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise UsageError(f"sampler: rank {rank} is not in [0, world_size={world_size})")


def distributed_sampler(rank: int, world_size: int, *, options: object = None) -> ShareFn:
    """Rank ``rank``'s share of the padded order (module docstring)."""
    check_rank(rank, world_size)

    def share(order: Sequence[int]) -> list[int]:
        items = list(order)
        if not items:
            return []
        total = -(-len(items) // world_size) * world_size
        while len(items) < total:
            items.extend(items[: total - len(items)])
        return items[rank:total:world_size]

    return share
