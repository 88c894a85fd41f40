"""The mixture's sampling schedule: shares, draws within an entry, interleaving, seeding, one-entry equivalence,
streaming, the split over ranks, and exact mid-epoch resume through the real loader with 2 workers."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
import torch

from embodied_core.data.loader import ResumableLoader
from embodied_core.data.mixture import MixtureDataset, MixtureSchedule, apportion
from embodied_core.data.samplers import cyclic_sampler
from embodied_core.model_api import collate_samples

# three entries of unequal size and episode structure
SIZES = [600, 150, 2250]
RANGES = [[(0, 200), (200, 600)], [(i * 10, i * 10 + 10) for i in range(15)], [(0, 1000), (1000, 2000), (2000, 2250)]]
WEIGHTS = [1.0, 3.0, 6.0]


def _schedule(**overrides: Any) -> MixtureSchedule:
    settings: dict[str, Any] = dict(sizes=SIZES, episode_ranges=RANGES, weights=WEIGHTS, weighting="dataset", seed=7)
    settings.update(overrides)
    return MixtureSchedule(**settings)


def _entries(schedule: MixtureSchedule, order: list[int]) -> np.ndarray:
    return schedule.entry_of(order)


@pytest.mark.parametrize("weighting", ["dataset", "frames", "trajectory"])
def test_shares_over_an_epoch_of_10k_draws_are_within_1_percent(weighting: str) -> None:
    schedule = _schedule(weighting=weighting, samples_per_epoch=10_000)
    order = schedule(0)
    assert len(order) == 10_000
    counts = Counter(_entries(schedule, order).tolist())
    raw = {"dataset": WEIGHTS, "frames": [w * n for w, n in zip(WEIGHTS, SIZES, strict=True)],
           "trajectory": [w * len(r) for w, r in zip(WEIGHTS, RANGES, strict=True)]}[weighting]
    for entry, weight in enumerate(raw):
        assert abs(counts[entry] / 10_000 - weight / sum(raw)) < 0.01
    # the shares are exact up to rounding: largest remainder over 10k draws
    assert [counts[e] for e in range(3)] == apportion(10_000, raw)


def test_draws_within_an_entry_repeat_only_when_it_is_oversampled() -> None:
    schedule = _schedule(samples_per_epoch=3000)  # shares 300 / 900 / 1800 of 600 / 150 / 2250 samples
    order = np.asarray(schedule(0))
    local = order % schedule.total
    entries = schedule.entry_of(order)
    first = local[entries == 0]
    assert len(first) == 300 and len(set(first.tolist())) == 300  # undersampled: each sample at most once
    second = Counter(local[entries == 1].tolist())
    assert len(second) == 150 and set(second.values()) == {6}  # 900 draws of 150: every sample 6 times
    # each repetition has its own virtual index (its own augmentation seed)
    assert len(set(order[entries == 1].tolist())) == 900


def test_trajectory_weighting_gives_every_episode_an_equal_share() -> None:
    schedule = _schedule(weighting="trajectory", samples_per_epoch=2000)
    order = np.asarray(schedule(0))
    local = order % schedule.total
    third = local[schedule.entry_of(order) == 2] - schedule.offsets[2]
    per_episode = Counter(int(np.searchsorted([1000, 2000], i, side="right")) for i in third)
    assert max(per_episode.values()) - min(per_episode.values()) <= 1  # 1000-, 1000- and 250-frame episodes alike


def test_epochs_differ_and_the_order_is_a_function_of_seed_and_epoch() -> None:
    a, b = _schedule(), _schedule()
    assert a(3) == b(3)
    assert a(0) != a(1)
    assert _schedule(seed=8)(0) != a(0)
    assert a.signature == b.signature != _schedule(weights=[1.0, 3.0, 5.0]).signature


def test_without_shuffle_entries_are_spread_evenly_in_their_own_order() -> None:
    schedule = _schedule(shuffle=False, samples_per_epoch=100)
    order = np.asarray(schedule(0))
    entries = schedule.entry_of(order)
    for entry, count in enumerate(schedule.counts):  # 10 / 30 / 60 draws: gaps of about 10 / 3.3 / 1.7
        gaps = np.diff(np.flatnonzero(entries == entry))
        assert gaps.max() <= -(-100 // count) + 1
    for entry in range(3):
        mine = order[entries == entry] % schedule.total - schedule.offsets[entry]
        assert mine.tolist() == sorted(mine.tolist())  # the dataset's own order


@pytest.mark.parametrize("streaming", [False, True], ids=["map", "streaming"])
def test_a_mixture_of_one_entry_reads_the_single_dataset_order(streaming: bool) -> None:
    class Plain:
        def __len__(self) -> int:
            return 48

        def __getitem__(self, i: int) -> dict[str, Any]:
            return {"i": torch.tensor(i)}

    ranges = [(0, 7), (7, 19), (19, 22), (22, 31), (31, 42), (42, 48)]
    single = ResumableLoader(Plain(), batch_size=4, share_fn=cyclic_sampler(0, 1), seed=5, sample_transform=None,
                             collate_fn=collate_samples, streaming=streaming, episode_ranges=ranges)
    schedule = MixtureSchedule(sizes=[48], episode_ranges=[ranges], weights=[2.0], weighting="dataset", seed=5,
                               global_batch=4, streaming=streaming)
    for epoch in range(3):
        assert schedule(epoch) == single.epoch_indices(epoch)


def test_streaming_reads_each_entry_a_few_episodes_at_a_time() -> None:
    for streaming, most in ((True, 4), (False, 15)):
        schedule = _schedule(streaming=streaming, samples_per_epoch=1500)  # entry 1: 450 draws of its 15 episodes
        order = np.asarray(schedule(0))
        second = order[schedule.entry_of(order) == 1] % schedule.total - schedule.offsets[1]
        episodes = {int(i) // 10 for i in second[:40]}  # the first 40 draws: one window of 4 episodes when streaming
        assert len(episodes) == 4 if streaming else len(episodes) >= 10, (streaming, episodes)
        assert len(episodes) <= most


def test_ranks_get_disjoint_whole_batches_that_add_up_to_the_one_process_epoch() -> None:
    one = _schedule(samples_per_epoch=1003, global_batch=8)  # 2 ranks x batch 4: rounded down to 1000
    assert len(one) == 1000
    order = one(2)
    shares = [cyclic_sampler(rank, 2)(order) for rank in range(2)]
    assert [len(s) for s in shares] == [500, 500] and all(len(s) % 4 == 0 for s in shares)
    assert sorted(shares[0] + shares[1]) == sorted(order)
    assert not set(shares[0]) & set(shares[1])
    # global step k of 2 ranks (batch 4 each) reads exactly step k of one process with batch 8
    for step in range(0, 125, 31):
        two = shares[0][step * 4:(step + 1) * 4] + shares[1][step * 4:(step + 1) * 4]
        assert sorted(two) == sorted(order[step * 8:(step + 1) * 8])


def test_an_epoch_shorter_than_one_global_batch_is_an_error() -> None:
    with pytest.raises(ValueError, match="too few for one global batch of 16"):
        _schedule(samples_per_epoch=10, global_batch=16)


class _Entry:
    """Entry ``e``'s samples: index and entry; a random draw shows the per-sample seeding."""

    def __init__(self, entry: int, size: int) -> None:
        self.entry, self.size = entry, size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"entry": torch.tensor(self.entry), "i": torch.tensor(i)}


def _augment(sample: dict[str, Any]) -> dict[str, Any]:
    return {**sample, "noise": torch.rand(2)}


def _loader(num_workers: int, streaming: bool = False) -> ResumableLoader:
    sizes = [13, 29, 6]
    dataset = MixtureDataset([_Entry(e, n) for e, n in enumerate(sizes)], features={}, tag_entries=False, fps=None)
    ranges = [[(i, min(i + 4, n)) for i in range(0, n, 4)] for n in sizes]  # episodes of 4 samples
    schedule = MixtureSchedule(sizes=sizes, episode_ranges=ranges, weights=[1.0, 1.0, 2.0], weighting="dataset",
                               seed=3, samples_per_epoch=40, global_batch=4, streaming=streaming)
    return ResumableLoader(dataset, batch_size=4, share_fn=cyclic_sampler(0, 1), seed=3, sample_transform=_augment,
                           collate_fn=collate_samples, num_workers=num_workers, order=schedule, streaming=streaming)


def _take(loader: ResumableLoader, n: int) -> list[dict[str, torch.Tensor]]:
    iterator = iter(loader)
    batches = [next(iterator) for _ in range(n)]
    loader.close()
    return batches


@pytest.mark.timeout(120)
@pytest.mark.parametrize("streaming", [False, True], ids=["map", "streaming"])
def test_mid_epoch_resume_with_two_workers_reproduces_the_uninterrupted_batches(streaming: bool) -> None:
    straight = _take(_loader(2, streaming), 16)  # 10 batches per epoch: the split lands mid-epoch 1
    first = _loader(2, streaming)
    head = _take(first, 13)
    state = first.state_dict()
    assert (state["epoch"], state["position"]) == (1, 12) and state["order"] == first.order.signature
    resumed = _loader(2, streaming)
    resumed.load_state_dict(state)
    tail = _take(resumed, 3)
    for a, b in zip(straight, head + tail, strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # the oversampled entry 2 (6 samples, 16 draws) gets a fresh augmentation for each repetition
    epoch0 = torch.cat([b["noise"] for b in straight[:10]])[torch.cat([b["entry"] for b in straight[:10]]) == 2]
    assert len({tuple(row.tolist()) for row in epoch0}) == len(epoch0)


def test_a_state_saved_with_another_mixture_is_refused() -> None:
    state = _loader(0).state_dict()
    other = _loader(0)
    other.order.weights = [1.0, 1.0, 3.0]
    with pytest.raises(ValueError, match=r"the dataset mixture .* changed"):
        other.load_state_dict(state)
