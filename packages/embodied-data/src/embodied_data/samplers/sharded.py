"""``sharded``: DreamZero's length-weighted shard sampling (``DreamZeroShardedSampler``).

The sample positions (ordered by episode in every dataset of ours, so a shard is a run of consecutive episodes'
samples, as DreamZero's trajectory shards) are cut into shards of ``num_steps_per_shard``; the last one may be
shorter. Each epoch draws ``num_shards_to_sample`` shards with replacement, with probability proportional to their
length (so every sample is equally likely), shuffles the draw, and deals it round robin to the ranks; a rank reads
``int(shard_sampling_rate * num_steps_per_shard)`` shuffled samples of each of its shards (all of a shorter one).
All ranks are cut to the shortest rank's count.

Randomness comes from ``seed`` and the epoch's order itself (which the loader derives from ``--seed`` and the
epoch): the share is a pure function of the order, hence identical on every rank and after a resume.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from embodied_core.errors import UsageError
from embodied_data.samplers.distributed import ShareFn, check_rank
from embodied_data.samplers.specs import ShardedOptions

__all__ = ["shard_lengths", "sharded_sampler"]


def shard_lengths(num_samples: int, steps_per_shard: int) -> np.ndarray:
    """Lengths of the consecutive shards of ``num_samples`` positions."""
    full, rest = divmod(num_samples, steps_per_shard)
    return np.asarray([steps_per_shard] * full + ([rest] if rest else []), dtype=np.int64)


def _order_seed(order: Sequence[int], seed: int) -> int:
    head = np.asarray(list(order[:4096]), dtype=np.int64).tobytes()
    digest = hashlib.sha256(head + int(seed).to_bytes(8, "little", signed=True) + len(order).to_bytes(8, "little"))
    return int.from_bytes(digest.digest()[:8], "little")


def sharded_sampler(rank: int, world_size: int, *, options: ShardedOptions | None = None) -> ShareFn:
    """Rank ``rank``'s samples of the epoch's shard schedule (module docstring)."""
    check_rank(rank, world_size)
    options = ShardedOptions() if options is None else options
    steps, rate = options.num_steps_per_shard, options.shard_sampling_rate
    draws, seed = options.num_shards_to_sample, options.seed
    if steps < 1 or draws < 1 or not 0.0 < rate <= 1.0:
        raise UsageError(f"plugins.sharded: need num_steps_per_shard >= 1, num_shards_to_sample >= 1 and "
                         f"0 < shard_sampling_rate <= 1 (got {steps}, {draws}, {rate})")
    cap = max(1, int(steps * rate))

    def share(order: Sequence[int]) -> list[int]:
        positions = np.sort(np.asarray(list(order), dtype=np.int64))
        if not positions.size:
            return []
        lengths = shard_lengths(len(positions), steps)
        rng = np.random.default_rng(_order_seed(order, seed))
        schedule = rng.choice(len(lengths), size=draws, p=lengths / lengths.sum())
        rng.shuffle(schedule)
        takes = np.minimum(lengths, cap)
        counts = [int(takes[schedule[r::world_size]].sum()) for r in range(world_size)]
        out: list[int] = []
        for slot, shard in enumerate(schedule):
            members = positions[shard * steps: shard * steps + lengths[shard]]
            picked = rng.permutation(members)[:cap]
            if slot % world_size == rank:
                out.extend(picked.tolist())
        return out[:min(counts)]

    return share
