"""DreamZero's training mixture as LoongForge draws it (``data.use_mixture_dataset``).

LoongForge (``dreamzero/dataset/datasets.py``, ``DreamZeroLeRobotMixtureDataset``, c6275661) wraps the dataset (one,
weight 1.0) in a mixture whose epoch has ``int(sum(n_d * p_d))`` indices and whose index ``i`` of epoch ``e`` is a
random ``(dataset, trajectory, step)``:

- dataset weights ``p_d``: the entry's ``weight``, times its number of samples ``n_d`` with
  ``balance_dataset_weights``, normalized;
- trajectory weights within a dataset: 1, times the trajectory's number of steps with
  ``balance_trajectory_weights``; 0 for the episodes ``info.json`` lists as ``discarded_episode_indices``;
  normalized (no weight left is an error);
- the draw: ``rng = np.random.default_rng(h)`` with ``h`` the low 128 bits of
  ``int(sha256(repr((epoch, index, seed))).hexdigest(), 16)`` and ``seed`` = ``data.mixture_sampling_seed``
  (default ``--seed``); ``d = rng.choice(D, p=p)``; with ``allow_padding_at_end`` one
  ``t = rng.choice(T_d, p=w_d)`` and ``allowed = L_t``, else trajectories are drawn until ``L_t >= m + 1``
  (``m`` = the largest frame offset a sample reads, ``max_delta_index``) and ``allowed = L_t - m``; then
  ``step = rng.choice([s for s in range(L_t) if s < allowed])``.

LoongForge keeps steps ``s <= allowed`` (an inclusive bound): without padding, the anchor ``L_t - m`` reads one
frame past the episode's end, which the reader then clamps (93 of 2000 indices on a LIBERO-layout set, see
``../shared/datasets/strategies/README.md``). We draw ``s < allowed`` by default, so every window lies inside its
episode; ``data.mixture_inclusive_step_bound=true`` reproduces the reference draws exactly. With
``use_sample_transform_seed`` the per-sample augmentation is seeded with ``sample_transform_seed + i`` (the mixture
index, not the drawn step's flat index), and the precomputed cache is read by the drawn step's flat index, as there.

Every step of a trajectory is eligible (LoongForge's default without a step-filter file); the samples must be the
window samples of the ``dreamzero`` strategy (every frame an anchor: not ``language_chunk_sampling``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from embodied_core.errors import UsageError
from embodied_models.dreamzero.data.index import WindowIndex

__all__ = ["LoongForgeMixtureDraw", "Trajectories", "build_mixture_draw", "safe_hash", "trajectories_of"]


def safe_hash(value: tuple[int, ...]) -> int:
    """LoongForge's ``safe_hash``: the low 128 bits of the sha256 of ``repr(value)`` as an integer."""
    return int(hashlib.sha256(repr(value).encode("utf-8")).hexdigest(), 16) & ((1 << 128) - 1)


@attrs.frozen(kw_only=True)
class Trajectories:
    """One dataset as the mixture sees it: its episodes in order, their lengths, where each starts among the
    dataset's samples, the largest frame offset a sample reads and the discarded episodes."""

    ids: np.ndarray
    lengths: np.ndarray
    starts: np.ndarray
    max_delta_index: int
    discarded: frozenset[int]
    size: int


def trajectories_of(dataset: Any, *, label: str) -> Trajectories:
    """The :class:`Trajectories` of a ``dreamzero``-strategy LeRobot dataset (UsageError for other samples)."""
    index = getattr(dataset, "index", None)
    if not isinstance(index, WindowIndex):
        raise UsageError(f"{label}: data.use_mixture_dataset draws (trajectory, step) pairs from the dreamzero "
                         "strategy's window samples (--dataset-strategy dreamzero, data.language_chunk_sampling="
                         "false)")
    ranges = index.episode_ranges()
    starts = np.asarray([a for a, _ in ranges], dtype=np.int64)
    lengths = np.asarray([b - a for a, b in ranges], dtype=np.int64)
    ids = index.episodes[starts].astype(np.int64)
    max_delta = max(max(offsets) for offsets in index.offsets.values())
    info = getattr(getattr(dataset, "meta", None), "info", {}) or {}
    discarded = frozenset(int(e) for e in info.get("discarded_episode_indices", []))
    return Trajectories(ids=ids, lengths=lengths, starts=starts, max_delta_index=int(max_delta), discarded=discarded,
                        size=len(dataset))


class LoongForgeMixtureDraw:
    """The draw of the module docstring (an ``embodied_core.data.mixture.drawn.MixtureDraw``).

    Args:
        datasets: each entry's :class:`Trajectories`.
        weights: each entry's weight (``data_mixture`` entries; 1.0 for ``--dataset-path``).
        seed: the sampling seed.
        balance_dataset_weights, balance_trajectory_weights, allow_padding_at_end: LoongForge's switches.
        inclusive_step_bound: LoongForge's ``<=`` step bound (default: ``<``, windows inside the episode).
        labels: how messages name the entries.
    """

    def __init__(self, datasets: Sequence[Trajectories], weights: Sequence[float], *, seed: int,
                 balance_dataset_weights: bool = True, balance_trajectory_weights: bool = True,
                 allow_padding_at_end: bool = False, inclusive_step_bound: bool = False,
                 labels: Sequence[str] | None = None) -> None:
        self.datasets = list(datasets)
        self.seed = int(seed)
        self.allow_padding_at_end = allow_padding_at_end
        self.inclusive_step_bound = inclusive_step_bound
        labels = list(labels) if labels is not None else [f"entry {i}" for i in range(len(self.datasets))]
        sizes = np.asarray([d.size for d in self.datasets], dtype=np.float64)
        raw = np.asarray(weights, dtype=np.float64)
        dataset_weights = raw * sizes if balance_dataset_weights else raw.copy()
        self.dataset_weights = dataset_weights / dataset_weights.sum()
        self.trajectory_weights = [self._trajectory_weights(d, balance_trajectory_weights, label)
                                   for d, label in zip(self.datasets, labels, strict=True)]
        self.length = int((sizes * self.dataset_weights).sum())
        self.signature = hashlib.sha256(repr((
            [d.lengths.tolist() for d in self.datasets], raw.tolist(), self.seed, balance_dataset_weights,
            balance_trajectory_weights, allow_padding_at_end, inclusive_step_bound)).encode()).hexdigest()[:16]

    def _trajectory_weights(self, data: Trajectories, balance: bool, label: str) -> np.ndarray:
        weights = np.ones(len(data.ids))
        if balance:
            weights *= data.lengths  # every step is eligible: the step filter's length is the trajectory's
        weights[[i for i, t in enumerate(data.ids.tolist()) if t in data.discarded]] = 0.0
        if weights.sum() == 0:
            raise UsageError(f"{label}: no trajectory left to draw from (all are discarded_episode_indices)")
        weights /= weights.sum()
        if not self.allow_padding_at_end and weights[data.lengths >= data.max_delta_index + 1].sum() <= 0.0:
            raise UsageError(f"{label}: data.allow_padding_at_end=false needs a trajectory of at least "
                             f"{data.max_delta_index + 1} steps (the largest frame offset a sample reads + 1); the "
                             f"longest has {int(data.lengths.max())}: set data.allow_padding_at_end=true or read "
                             "shorter windows")
        return weights

    def __len__(self) -> int:
        return self.length

    def shares(self) -> list[float]:
        """Each entry's probability of being drawn."""
        return self.dataset_weights.tolist()

    def draw(self, epoch: int, index: int) -> tuple[int, int, int]:
        """``(entry, trajectory position in it, step)`` for ``index`` of ``epoch`` (the module docstring's draw)."""
        rng = np.random.default_rng(safe_hash((int(epoch), int(index), self.seed)))
        entry = int(rng.choice(len(self.datasets), p=self.dataset_weights))
        data, weights = self.datasets[entry], self.trajectory_weights[entry]
        if self.allow_padding_at_end:
            trajectory = int(rng.choice(len(data.ids), p=weights))
            allowed = int(data.lengths[trajectory])
        else:
            length = 0
            while length < data.max_delta_index + 1:
                trajectory = int(rng.choice(len(data.ids), p=weights))
                length = int(data.lengths[trajectory])
            allowed = length - data.max_delta_index
        steps = np.arange(int(data.lengths[trajectory]))
        steps = steps[steps <= allowed] if self.inclusive_step_bound else steps[steps < allowed]
        return entry, trajectory, int(rng.choice(steps))

    def locate(self, epoch: int, index: int) -> tuple[int, int]:
        """``(entry, position)`` of the drawn step (positions: one per step, episode after episode)."""
        entry, trajectory, step = self.draw(epoch, index)
        # the step is always a real one (< L); with the inclusive bound its window may end one frame past the
        # episode, which the window sample clamps (and marks _is_pad)
        return entry, int(self.datasets[entry].starts[trajectory]) + step


def build_mixture_draw(datasets: Sequence[Any], weights: Sequence[float], *, seed: int,
                       data_config: Any) -> LoongForgeMixtureDraw:
    """The ``mixture_draw()`` factory of DreamZero's data section (``embodied_core.data.mixture.drawn``)."""
    labels = [f"data_mixture.entries[{i}] ({getattr(d, 'root', '')})" for i, d in enumerate(datasets)]
    seed = seed if data_config.mixture_sampling_seed is None else data_config.mixture_sampling_seed
    return LoongForgeMixtureDraw([trajectories_of(d, label=label) for d, label in zip(datasets, labels, strict=True)],
                                 weights, seed=seed, balance_dataset_weights=data_config.balance_dataset_weights,
                                 balance_trajectory_weights=data_config.balance_trajectory_weights,
                                 allow_padding_at_end=data_config.allow_padding_at_end,
                                 inclusive_step_bound=data_config.mixture_inclusive_step_bound, labels=labels)
