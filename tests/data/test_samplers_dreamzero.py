"""DreamZero's samplers (embodied-data ``embodied.samplers``: distributed, global_batch_shard, sharded)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DistributedSampler

from embodied_core import registry
from embodied_core.data.loader import ResumableLoader
from embodied_core.registry import groups
from embodied_data.samplers.sharded import shard_lengths
from embodied_data.samplers.specs import GlobalBatchShardOptions, ShardedOptions


def _share(name: str, rank: int, world: int, options: object = None):
    return registry.load_factory(groups.SAMPLERS, name, options=options)(rank, world)


@pytest.mark.parametrize(("n", "world"), [(10, 3), (12, 4), (7, 2)])
def test_distributed_is_torch_distributed_sampler_split(n: int, world: int) -> None:
    order = list(range(n))
    shares = [_share("distributed", r, world)(order) for r in range(world)]
    for rank, share in enumerate(shares):
        assert share == list(DistributedSampler(order, num_replicas=world, rank=rank, shuffle=False))
    assert len({len(s) for s in shares}) == 1
    assert set().union(*map(set, shares)) == set(order)


def test_global_batch_shard_takes_whole_local_batches() -> None:
    order = torch.randperm(50, generator=torch.Generator().manual_seed(3)).tolist()
    options = GlobalBatchShardOptions(batch_size=4)
    shares = [_share("global_batch_shard", r, 3, options)(order) for r in range(3)]
    assert [len(s) for s in shares] == [16, 16, 16]  # 50 // 12 = 4 global batches
    for rank, share in enumerate(shares):
        for k in range(4):
            start = k * 12 + rank * 4
            assert share[k * 4:(k + 1) * 4] == order[start:start + 4]
    flat = [i for s in shares for i in s]
    assert len(flat) == len(set(flat))


def _sharded_options(**kw: object) -> ShardedOptions:
    return ShardedOptions(**{"num_steps_per_shard": 10, "shard_sampling_rate": 0.5, "num_shards_to_sample": 40, **kw})


def test_sharded_deterministic_equal_counts_and_disjoint_shards() -> None:
    order = torch.randperm(45, generator=torch.Generator().manual_seed(0)).tolist()
    options = _sharded_options()
    shares = [_share("sharded", r, 2, options)(order) for r in range(2)]
    assert shares == [_share("sharded", r, 2, options)(list(order)) for r in range(2)]
    assert len(shares[0]) == len(shares[1]) > 0
    other = torch.randperm(45, generator=torch.Generator().manual_seed(1)).tolist()
    assert _share("sharded", 0, 2, options)(other) != shares[0]  # another epoch order -> another schedule
    lengths = shard_lengths(45, 10)
    assert lengths.tolist() == [10, 10, 10, 10, 5] and lengths.sum() == 45
    for share in shares:  # each draw reads 5 distinct members of one shard of consecutive positions
        for k in range(0, len(share) - 5, 5):
            chunk = share[k:k + 5]
            assert len(set(chunk)) == 5 and len({i // 10 for i in chunk}) == 1


def test_sharded_weights_shards_by_length() -> None:
    options = _sharded_options(num_shards_to_sample=4000)  # reads 5 samples per draw
    share = _share("sharded", 0, 1, options)(list(range(25)))  # shards of 10, 10 and 5 samples
    per_sample = np.bincount(np.asarray(share), minlength=25)
    full, short = per_sample[:20].mean(), per_sample[20:].mean()
    assert abs(short / full - 1.0) < 0.1  # a uniform shard choice reads the short shard's samples twice as often


def _loader(share_fn, seed: int = 5) -> ResumableLoader:
    return ResumableLoader([{"i": torch.tensor(i)} for i in range(37)], batch_size=3, share_fn=share_fn, seed=seed,
                           sample_transform=None, collate_fn=lambda s: torch.stack([x["i"] for x in s]))


@pytest.mark.parametrize("name", ["distributed", "global_batch_shard", "sharded"])
def test_resume_is_exact(name: str) -> None:
    options = {"global_batch_shard": GlobalBatchShardOptions(batch_size=3), "sharded": _sharded_options(),
               "distributed": None}[name]
    full = _loader(_share(name, 1, 2, options))
    it = iter(full)
    expected = [next(it).tolist() for _ in range(14)]  # crosses an epoch boundary
    first = _loader(_share(name, 1, 2, options))
    it = iter(first)
    head = [next(it).tolist() for _ in range(5)]
    resumed = _loader(_share(name, 1, 2, options))
    resumed.load_state_dict(first.state_dict())
    it = iter(resumed)
    assert head + [next(it).tolist() for _ in range(9)] == expected
