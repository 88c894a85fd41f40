"""``global_batch_shard``: the order cut into global batches of ``batch_size x world_size``; rank r takes the r-th
local batch of each (DreamZero's ``GlobalBatchShardSampler``). The incomplete last global batch is dropped, so
every rank gets whole local batches and the same count.

``batch_size`` (the sampler's option, ``plugins.global_batch_shard.batch_size``) must equal
``--per-device-batch-size`` for the local batches to line up with the loader's batches.
"""

from __future__ import annotations

from collections.abc import Sequence

from embodied_data.samplers.distributed import ShareFn, check_rank
from embodied_data.samplers.specs import GlobalBatchShardOptions

__all__ = ["global_batch_shard_sampler"]


def global_batch_shard_sampler(rank: int, world_size: int, *, options: GlobalBatchShardOptions | None = None
                               ) -> ShareFn:
    """Rank ``rank``'s local batches (module docstring)."""
    check_rank(rank, world_size)
    batch = (GlobalBatchShardOptions() if options is None else options).batch_size

    def share(order: Sequence[int]) -> list[int]:
        step = batch * world_size
        usable = len(order) // step * step
        out: list[int] = []
        for start in range(rank * batch, usable, step):
            out.extend(order[start:start + batch])
        return out

    return share
