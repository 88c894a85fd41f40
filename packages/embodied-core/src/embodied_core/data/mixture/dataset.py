"""The datasets of a mixture as one map-style dataset, and the per-entry sample transform.

:class:`MixtureDataset` concatenates the entries' datasets: index ``i`` (``0 <= i < total``) is sample
``i - offset_e`` of entry e; a virtual index ``v >= total`` (a sample drawn again in the same epoch, see
:mod:`embodied_core.data.mixture.schedule`) reads sample ``v mod total``. When the entries need different sample
transforms (their own data section, cameras, statistics), each sample carries its entry under
:data:`ENTRY_KEY` and :class:`MixtureTransform` applies that entry's transform (and drops the key), in the
DataLoader workers like any sample transform.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from embodied_core.protocols import DatasetFeature

__all__ = ["ENTRY_KEY", "MixtureDataset", "MixtureTransform"]

ENTRY_KEY = "mixture_entry"
"""Sample key of the entry index, read (and removed) by :class:`MixtureTransform`."""


class MixtureDataset:
    """The concatenation of a mixture's entry datasets (a :class:`~embodied_core.protocols.TrainingDataset`).

    Args:
        datasets: each entry's map-style dataset (default task applied).
        features: the model-level features (entry 0's); each embodiment's own are in the policy folder.
        tag_entries: add :data:`ENTRY_KEY` to every sample (the entries' transforms differ).
        fps: the entries' common frame rate (None when they differ).
    """

    root = None
    episodes = None

    def __init__(self, datasets: Sequence[Any], *, features: Mapping[str, DatasetFeature], tag_entries: bool,
                 fps: float | None) -> None:
        self.datasets = list(datasets)
        self.offsets = np.concatenate([[0], np.cumsum([len(d) for d in self.datasets])]).astype(np.int64)
        self.total = int(self.offsets[-1])
        self.features = dict(features)
        self.tag_entries = tag_entries
        self.fps = fps
        self.stats: dict[str, dict[str, np.ndarray]] = {}  # per embodiment: MixtureData.embodiments

    def __len__(self) -> int:
        return self.total

    def locate(self, index: int) -> tuple[int, int]:
        """``(entry, position in the entry)`` of a (virtual) index."""
        local = int(index) % self.total
        entry = int(np.searchsorted(self.offsets, local, side="right")) - 1
        return entry, local - int(self.offsets[entry])

    def __getitem__(self, index: int) -> dict[str, Any]:
        entry, position = self.locate(index)
        sample = self.datasets[entry][position]
        if self.tag_entries:
            sample = {**sample, ENTRY_KEY: entry}
        return sample

    def episode_ranges(self) -> list[tuple[int, int]]:
        """Every entry's episode ranges, shifted to the concatenation's indices."""
        out: list[tuple[int, int]] = []
        for offset, dataset in zip(self.offsets[:-1], self.datasets, strict=True):
            ranges = dataset.episode_ranges() if hasattr(dataset, "episode_ranges") else [(0, len(dataset))]
            out.extend((int(offset) + int(a), int(offset) + int(b)) for a, b in ranges)
        return out


class MixtureTransform:
    """Applies entry e's sample transform to the samples of entry e (picklable; runs in DataLoader workers).

    Args:
        transforms: per entry, the model's sample transform built for that entry (None: the sample unchanged).
    """

    def __init__(self, transforms: Sequence[Callable[[dict[str, Any]], dict[str, Any]] | None]) -> None:
        self.transforms = list(transforms)

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        sample = dict(sample)
        entry = int(sample.pop(ENTRY_KEY))
        transform = self.transforms[entry]
        return transform(sample) if transform is not None else sample
