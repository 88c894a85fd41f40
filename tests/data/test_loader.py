"""ResumableLoader: resume exactness (map-style and streaming, 0 and 2 workers), worker seeding, samplers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.utils.data import Dataset

from embodied_core.config.model_config import BaseDataConfig
from embodied_core.data.loader import ResumableLoader
from embodied_core.data.samplers import block_sampler, cyclic_sampler
from embodied_core.data.streaming import StreamingShard, episode_blocks, streaming_order
from embodied_core.model_api import collate_samples
from embodied_data.formats.dummy import DummyDataset

EPISODE_LENGTHS = [7, 12, 3, 9, 11, 6]


class Episodes(Dataset):
    """Index -> (episode, frame); exposes its episode ranges like the real formats."""

    def __init__(self) -> None:
        self.starts = [sum(EPISODE_LENGTHS[:i]) for i in range(len(EPISODE_LENGTHS) + 1)]

    def __len__(self) -> int:
        return self.starts[-1]

    def episode_ranges(self) -> list[tuple[int, int]]:
        return list(zip(self.starts[:-1], self.starts[1:], strict=True))

    def __getitem__(self, index: int) -> dict[str, Any]:
        episode = max(i for i, s in enumerate(self.starts[:-1]) if s <= index)
        return {"index": torch.tensor(index), "episode_index": torch.tensor(episode)}


def _augment(sample: dict[str, Any]) -> dict[str, Any]:
    """A random augmentation drawn from the global RNGs the loader seeds per sample."""
    return {**sample, "noise": torch.rand(3)}


def _loader(*, num_workers: int = 0, streaming: bool = False, share_fn: Any = None, seed: int = 7,
            seed_workers: bool = False, collate_fn: Any = collate_samples, batch_size: int = 4) -> ResumableLoader:
    dataset = Episodes()
    return ResumableLoader(dataset, batch_size=batch_size, share_fn=share_fn or cyclic_sampler(0, 1), seed=seed,
                           sample_transform=_augment, collate_fn=collate_fn, num_workers=num_workers,
                           seed_workers=seed_workers, streaming=streaming, episode_ranges=dataset.episode_ranges(),
                           streaming_window_blocks=2)


def _take(iterator: Iterator[Any], n: int) -> list[Any]:
    return [next(iterator) for _ in range(n)]


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x) for x, y in zip(a, b, strict=True))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("streaming", [False, True], ids=["map", "streaming"])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_resume_reproduces_the_uninterrupted_batches(num_workers: int, streaming: bool) -> None:
    # 48 samples -> 12 batches per epoch; 26 batches cross two epoch boundaries, the split lands mid-epoch.
    straight = _take(iter(_loader(num_workers=num_workers, streaming=streaming)), 26)
    first = _loader(num_workers=num_workers, streaming=streaming)
    head = _take(iter(first), 13)
    state = first.state_dict()
    assert state["epoch"] == 1
    assert state["position"] == 4
    resumed = _loader(num_workers=num_workers, streaming=streaming)
    resumed.load_state_dict(state)
    tail = _take(iter(resumed), 13)
    assert _same(straight, head + tail)
    # the order and the per-sample augmentation do not depend on the worker count
    assert _same(straight, _take(iter(_loader(num_workers=2 - num_workers, streaming=streaming)), 26))
    # and each epoch visits every sample once (no repeats inside the 12 batches of epoch 0)
    epoch0 = torch.cat([b["index"] for b in straight[:12]]).tolist()
    assert sorted(epoch0) == list(range(48))


def test_epochs_differ_and_seed_matters() -> None:
    batches = _take(iter(_loader()), 24)
    epoch0 = torch.cat([b["index"] for b in batches[:12]])
    epoch1 = torch.cat([b["index"] for b in batches[12:]])
    assert not torch.equal(epoch0, epoch1)
    other = torch.cat([b["index"] for b in _take(iter(_loader(seed=8)), 12)])
    assert not torch.equal(epoch0, other)
    # the same sample gets a different augmentation in another epoch
    noise0 = {int(i): n for b in batches[:12] for i, n in zip(b["index"], b["noise"], strict=True)}
    noise1 = {int(i): n for b in batches[12:] for i, n in zip(b["index"], b["noise"], strict=True)}
    assert not torch.equal(noise0[5], noise1[5])


def _collate_with_worker_draw(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Collate runs in the worker: its draw shows the worker's global RNG state."""
    batch = collate_samples(samples)
    info = torch.utils.data.get_worker_info()
    batch["worker"] = torch.tensor(info.id if info else -1)
    batch["worker_draw"] = torch.rand(1)
    return batch


@pytest.mark.timeout(120)
def test_seeded_workers_are_deterministic_and_distinct() -> None:
    def run() -> list[dict[str, Any]]:
        return _take(iter(_loader(num_workers=2, seed_workers=True, collate_fn=_collate_with_worker_draw)), 4)

    first, second = run(), run()
    assert [int(b["worker"]) for b in first] == [0, 1, 0, 1]
    assert _same(first, second)
    # workers start from different seeds, so their first draws differ
    assert not torch.equal(first[0]["worker_draw"], first[1]["worker_draw"])


@pytest.mark.parametrize("streaming", [False, True], ids=["map", "streaming"])
def test_cyclic_and_block_samplers_split_the_epoch_over_two_ranks(streaming: bool) -> None:
    order = _loader(streaming=streaming).epoch_indices(0)  # world size 1: the full epoch order
    shares = {}
    for name, make in (("cyclic", cyclic_sampler), ("block", block_sampler)):
        ranks = [_loader(streaming=streaming, share_fn=make(r, 2)) for r in range(2)]
        parts = [loader.epoch_indices(0) for loader in ranks]
        assert len(parts[0]) == len(parts[1]) == 24
        assert not set(parts[0]) & set(parts[1])
        shares[name] = parts
        for rank, loader in enumerate(ranks):  # the batches a rank yields are its share, in order
            yielded = torch.cat([b["index"] for b in _take(iter(loader), 6)]).tolist()
            assert yielded == parts[rank]
    assert shares["cyclic"][0] == order[0::2]
    assert shares["cyclic"][1] == order[1::2]
    assert shares["block"][0] == order[:24]
    assert shares["block"][1] == order[24:]


def test_streaming_order_stays_within_a_window_of_episodes() -> None:
    dataset = Episodes()
    blocks = episode_blocks(dataset.episode_ranges(), len(dataset), block_size=64)
    assert blocks == dataset.episode_ranges()
    order = streaming_order(blocks, seed=3, shuffle=True, window_blocks=2)
    assert sorted(order) == list(range(len(dataset)))
    episodes = [int(dataset[i]["episode_index"]) for i in order]
    # each window of 2 episodes is read completely before the next one starts: cut the order at the
    # cumulative window sizes and compare the episode sets
    block_sequence = []
    for e in episodes:
        if e not in block_sequence:
            block_sequence.append(e)
    cut = 0
    for first in range(0, len(block_sequence), 2):
        window = block_sequence[first : first + 2]
        size = sum(EPISODE_LENGTHS[e] for e in window)
        assert set(episodes[cut : cut + size]) == set(window)
        cut += size
    assert streaming_order(blocks, seed=3, shuffle=False, window_blocks=2) == list(range(len(dataset)))
    assert episode_blocks(None, 10, block_size=4) == [(0, 4), (4, 8), (8, 10)]


@pytest.mark.timeout(120)
def test_streaming_shard_deals_batches_to_workers_in_order() -> None:
    keys = list(range(22))
    shard = StreamingShard(list(range(100)), keys, batch_size=4)  # 5 whole batches; the last 2 keys are dropped
    loader = torch.utils.data.DataLoader(shard, batch_size=4, num_workers=2)
    assert torch.cat(list(loader)).tolist() == keys[:20]


def test_resume_refuses_a_different_mode_or_seed() -> None:
    state = _loader(streaming=True).state_dict()
    with pytest.raises(ValueError, match="streaming=True"):
        _loader(streaming=False).load_state_dict(state)
    with pytest.raises(ValueError, match="seed=7"):
        _loader(seed=1, streaming=True).load_state_dict(state)


def test_dummy_dataset_exposes_episode_ranges_for_streaming() -> None:
    dataset = DummyDataset(BaseDataConfig(), num_samples=120)
    assert dataset.episode_ranges() == [(0, 50), (50, 100), (100, 120)]
    loader = ResumableLoader(dataset, batch_size=8, share_fn=cyclic_sampler(0, 1), seed=0,
                             sample_transform=lambda s: s, collate_fn=collate_samples, streaming=True,
                             episode_ranges=dataset.episode_ranges())
    batch = next(iter(loader))
    assert batch["action"].shape == (8, 16, 8)


@pytest.mark.timeout(240)
def test_trainer_resume_is_exact_with_streaming(tmp_path: Any) -> None:
    """--streaming reaches the loader through the Trainer, and a resumed run repeats the uninterrupted losses."""
    import json

    from embodied_core.trainer.api import Trainer

    def training(out: Any, **extra: Any) -> dict[str, Any]:
        return {"model_name": "tiny_flow_policy", "dataset_format": "dummy_datasets", "dtype": "float32",
                "streaming": True, "num_workers": 0, "per_device_batch_size": 4, "num_samples": 60,
                "output_dir": str(out), "lr_base": 1e-3, "lr_warmup_iters": 1, "lr_decay_iters": 6,
                "log_interval": 1, "seed": 5, "save_interval": 3, **extra}

    def losses(out: Any) -> list[float]:
        return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]

    straight, split = tmp_path / "straight", tmp_path / "split"
    Trainer({"training": training(straight, train_iters=6)}).train()
    Trainer({"training": training(split, train_iters=3)}).train()
    Trainer({"training": training(split, train_iters=6, resume=True)}).train()
    assert losses(split) == losses(straight)
    rank_state = torch.load(split / "checkpoints/step_3/training_state/rank0.pt", weights_only=True)
    assert rank_state["dataloader"]["streaming"] is True
    assert rank_state["dataloader"]["position"] == 12


def test_dummy_dataset_stats_and_model_declared_extra_keys() -> None:
    import attrs

    @attrs.define(kw_only=True)
    class LatentDataConfig(BaseDataConfig):
        def dummy_features(self) -> dict[str, tuple[tuple[int, ...], str]]:
            return {"latents": ((4, 2, 3), "bfloat16"), "token_ids": ((5,), "int64")}

    dataset = DummyDataset(LatentDataConfig(state_dim=3), num_samples=30)
    sample = dataset[4]
    assert sample["latents"].shape == (4, 2, 3)
    assert sample["latents"].dtype == torch.bfloat16
    assert sample["token_ids"].tolist() == [0] * 5
    assert torch.equal(dataset[4]["latents"], sample["latents"])
    stats = dataset.stats
    assert stats["observation.state"]["mean"].shape == (3,)
    assert stats["action"]["q01"].shape == (8,)
    assert (stats["action"]["q01"] > stats["action"]["min"]).all()
