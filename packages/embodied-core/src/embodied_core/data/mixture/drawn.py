"""A mixture whose samples a model's own rule draws per index (DreamZero's LoongForge mixture), in place of the
weighted schedule of :mod:`.schedule`.

A model's data section asks for it with a method ``mixture_draw() -> "module:attr" | None`` (DreamZero:
``data.use_mixture_dataset``); the named factory ``build(datasets, weights, *, seed, data_config)`` returns a
:class:`MixtureDraw`: the epoch length and, for ``(epoch, index)``, the entry and the position in it to read. Such a
model trains ``--dataset-path`` as a mixture of one entry (weight 1), exactly as LoongForge wraps its dataset.

Each epoch visits the indices ``0 .. len(draw) - 1`` in a seeded permutation (``--no-sampler-shuffle``: in order),
like a single dataset; the value the loader hands the dataset is ``epoch * len(draw) + index``, so each worker can
draw the sample itself, the sample knows its ``mixture_index`` (a model seeds its per-sample transform from it;
a dataset with an ``item(position, info=...)`` method, such as the LeRobot reader, gets it before its own
strategy transform runs), and the loader's ``(epoch, position)`` state resumes exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from embodied_core.data.mixture.dataset import ENTRY_KEY

__all__ = ["MIXTURE_INDEX_KEY", "DrawnMixtureDataset", "DrawnOrder", "MixtureDraw", "mixture_draw_path"]

MIXTURE_INDEX_KEY = "mixture_index"
"""Sample key of the index the draw was made for (``0 <= mixture_index < len(draw)``)."""


@runtime_checkable
class MixtureDraw(Protocol):
    """A model's per-index draw over the entries of a mixture."""

    signature: str
    """What the draws depend on, as a short string (stored in the loader state)."""

    def __len__(self) -> int:
        """Indices per epoch."""
        ...

    def locate(self, epoch: int, index: int) -> tuple[int, int]:
        """``(entry, position in the entry's dataset)`` drawn for ``index`` of ``epoch``."""
        ...

    def shares(self) -> list[float]:
        """The share of the draws each entry is meant to get (sums to 1)."""
        ...


def mixture_draw_path(data_config: Any) -> str | None:
    """The ``"module:attr"`` of the draw factory a data section asks for (its ``mixture_draw()``), else None."""
    hook = getattr(data_config, "mixture_draw", None)
    return hook() if callable(hook) else None


class DrawnOrder:
    """The loader's epoch order over a :class:`MixtureDraw`: ``epoch * n + i`` for ``i`` in a seeded permutation of
    ``range(n)`` (in order without shuffle)."""

    def __init__(self, draw: MixtureDraw, *, seed: int, shuffle: bool) -> None:
        self.draw = draw
        self.seed = seed
        self.shuffle = shuffle
        self.signature = f"drawn-{draw.signature}-{seed}-{int(shuffle)}"

    def __len__(self) -> int:
        return len(self.draw)

    def shares(self) -> list[float]:
        """Each entry's requested share (the draw's)."""
        return list(self.draw.shares())

    def entry_of(self, values: Sequence[int]) -> list[int]:
        """The entry each order value draws from (what ``embodied data mixture`` counts)."""
        n = len(self.draw)
        return [self.draw.locate(*divmod(int(v), n))[0] for v in values]

    def __call__(self, epoch: int) -> list[int]:
        import torch

        from embodied_core.data.loader import sample_seed

        n = len(self.draw)
        if self.shuffle:
            order = torch.randperm(n, generator=torch.Generator().manual_seed(sample_seed(self.seed, epoch, -1)))
            return (order + epoch * n).tolist()
        return list(range(epoch * n, (epoch + 1) * n))


class DrawnMixtureDataset:
    """The entries' datasets read through a :class:`MixtureDraw`: value ``epoch * n + i`` is the sample drawn for
    index ``i`` of ``epoch``, with :data:`MIXTURE_INDEX_KEY` (and the entry under :data:`ENTRY_KEY` when the entries'
    transforms differ)."""

    root = None
    episodes = None

    def __init__(self, datasets: Sequence[Any], draw: MixtureDraw, *, features: Any, tag_entries: bool,
                 fps: float | None) -> None:
        self.datasets = list(datasets)
        self.draw = draw
        self.features = dict(features)
        self.tag_entries = tag_entries
        self.fps = fps
        self.stats: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self.draw)

    def __getitem__(self, value: int) -> dict[str, Any]:
        epoch, index = divmod(int(value), len(self.draw))
        entry, position = self.draw.locate(epoch, index)
        dataset = self.datasets[entry]
        info = {MIXTURE_INDEX_KEY: index}
        # a dataset whose own (strategy) transform seeds per sample gets the index before that transform runs
        item = getattr(dataset, "item", None)
        sample = item(position, info=info) if callable(item) else {**dataset[position], **info}
        if self.tag_entries:
            sample[ENTRY_KEY] = entry
        return sample

    def episode_ranges(self) -> list[tuple[int, int]]:
        """One range: the draws are not grouped by episode."""
        return [(0, len(self.draw))]
