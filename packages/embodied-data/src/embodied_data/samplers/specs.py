"""Entry-point specs and options of the samplers (group ``embodied.samplers``; imports no torch)."""

from __future__ import annotations

import attrs

from embodied_core.registry import PluginSpec

__all__ = ["DISTRIBUTED", "GLOBAL_BATCH_SHARD", "SHARDED", "GlobalBatchShardOptions", "ShardedOptions"]


@attrs.define(kw_only=True)
class GlobalBatchShardOptions:
    """Options of the ``global_batch_shard`` sampler (``plugins.global_batch_shard``)."""

    batch_size: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    """Local batch size; set it to --per-device-batch-size."""


@attrs.define(kw_only=True)
class ShardedOptions:
    """Options of the ``sharded`` sampler (``plugins.sharded``)."""

    num_steps_per_shard: int = attrs.field(default=10_000, validator=attrs.validators.ge(1))
    """Samples per shard (consecutive positions)."""
    shard_sampling_rate: float = attrs.field(default=0.1, validator=[attrs.validators.gt(0.0),
                                                                     attrs.validators.le(1.0)])
    """Fraction of a shard's num_steps_per_shard read each time the shard is drawn."""
    num_shards_to_sample: int = attrs.field(default=1024, validator=attrs.validators.ge(1))
    """Shards drawn (with replacement, weighted by length) per epoch."""
    seed: int = 0
    """Mixed with the epoch's order (itself from --seed and the epoch) into the shard draw."""


DISTRIBUTED = PluginSpec(name="distributed", description="DistributedSampler split: pad the order to a multiple of "
                         "the world size, rank r takes every world_size-th index",
                         factory="embodied_data.samplers.distributed:distributed_sampler")
GLOBAL_BATCH_SHARD = PluginSpec(name="global_batch_shard", description="rank r takes the r-th local batch of each "
                                "global batch (plugins.global_batch_shard.batch_size)",
                                factory="embodied_data.samplers.global_batch_shard:global_batch_shard_sampler",
                                options=GlobalBatchShardOptions)
SHARDED = PluginSpec(name="sharded", description="DreamZero's length-weighted shard schedule (plugins.sharded)",
                     factory="embodied_data.samplers.sharded:sharded_sampler", options=ShardedOptions)
