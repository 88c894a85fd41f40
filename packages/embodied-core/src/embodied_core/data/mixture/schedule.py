"""The sampling schedule of a dataset mixture: which samples one epoch draws, and in which order.

Every epoch draws ``N`` samples (``data_mixture.samples_per_epoch``, default the entries' total number of samples),
rounded down to whole global batches (``per-device batch x world size``), so that every rank gets the same number
of whole local batches and a run on W processes reads exactly the samples of a one-process run with the same
global batch. For epoch ``k`` (all draws seeded by ``(seed, k)``, never by the global RNG):

1. **Shares.** Entry e's share ``p_e`` is its weight (``weighting: dataset``), its weight x samples (``frames``) or
   its weight x episodes (``trajectory``), normalized. Its draw count ``c_e`` is ``N p_e`` rounded by the
   largest-remainder method (ties to the lower entry index), so the counts add up to ``N`` and each share is
   within ``1/N`` of ``p_e``: stratified, not i.i.d., sampling.
2. **Draws within an entry.** The entry's samples are visited in a per-epoch order: a seeded permutation (the
   default), the dataset order (``--no-sampler-shuffle``), or the episode-block order of ``--streaming``
   (:func:`embodied_core.data.streaming.streaming_order`). ``c_e`` draws take that order whole ``c_e // n_e``
   times (a new permutation each pass) plus its first ``c_e mod n_e`` items: an undersampled entry reads each
   sample at most once per epoch, an oversampled one reads every sample ``c_e // n_e`` or one more times. With
   ``weighting: trajectory`` the ``c_e`` draws are split evenly over the entry's episodes first (the episodes
   that get one more draw are chosen by a seeded permutation), then taken from each episode the same way.
3. **Interleaving.** The entries' draw sequences are merged, each keeping its own order: at positions given by a
   seeded permutation of the ``N`` entry labels (shuffled), or spread evenly (``--no-sampler-shuffle``: entry e's
   k-th draw sits at ``(k + 0.5) / c_e`` of the epoch). An entry's draws therefore stay in its streaming order,
   and a mixture of one entry reads exactly the order of the single dataset.

Values in the order are *virtual* indices ``pass * total + offset_e + i`` (``total`` = all entries' samples,
``offset_e`` = entry e's first index in the concatenation): a sample drawn a second time in an epoch has another
index, hence another per-sample augmentation seed. :class:`~embodied_core.data.mixture.dataset.MixtureDataset`
reads index ``v`` as sample ``v mod total``. The order is rebuilt from ``(seed, epoch)`` alone, so the loader's
``(epoch, position)`` state resumes a mixture exactly, mid-epoch, with any worker count.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence

import numpy as np
import torch

from embodied_core.data.streaming import episode_blocks, streaming_order

__all__ = ["MixtureSchedule", "apportion"]


def apportion(total: int, shares: Sequence[float]) -> list[int]:
    """``total`` split in proportion to ``shares`` by the largest-remainder method (ties: lower index first)."""
    weights = np.asarray(shares, dtype=np.float64)
    exact = total * weights / weights.sum()
    counts = np.floor(exact).astype(np.int64)
    missing = total - int(counts.sum())
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[:missing]:
        counts[i] += 1
    return [int(c) for c in counts]


def _entry_seed(seed: int, epoch: int, entry: int) -> int:
    # entry 0 uses the seed of the single-dataset loader's epoch order (embodied_core.data.loader), so a mixture
    # of one entry reads exactly that order
    from embodied_core.data.loader import sample_seed

    return sample_seed(seed, epoch, -1 - 1000 * entry)


class MixtureSchedule:
    """The epoch order of a mixture (the ``order`` of :class:`~embodied_core.data.loader.ResumableLoader`).

    Args:
        sizes: samples of each entry.
        episode_ranges: each entry's ``(start, stop)`` episode ranges in its own indices (trajectory weighting and
            streaming read them).
        weights: the entries' weights (> 0).
        weighting: ``dataset``, ``frames`` or ``trajectory`` (module docstring).
        seed: seeds every draw (with the epoch).
        samples_per_epoch: draws per epoch before rounding (None: ``sum(sizes)``).
        global_batch: the epoch length is rounded down to a multiple of it.
        shuffle, streaming, streaming_window_blocks: the order inside each entry and the interleaving.
    """

    def __init__(self, *, sizes: Sequence[int], episode_ranges: Sequence[Sequence[tuple[int, int]]],
                 weights: Sequence[float], weighting: str, seed: int, samples_per_epoch: int | None = None,
                 global_batch: int = 1, shuffle: bool = True, streaming: bool = False,
                 streaming_window_blocks: int = 4) -> None:
        self.sizes = [int(n) for n in sizes]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.total = int(self.offsets[-1])
        self.blocks = [episode_blocks(list(r), n, 64) for r, n in zip(episode_ranges, self.sizes, strict=True)]
        self.weights = [float(w) for w in weights]
        self.weighting = weighting
        self.seed = int(seed)
        self.shuffle = shuffle
        self.streaming = streaming
        self.streaming_window_blocks = streaming_window_blocks
        requested = self.total if samples_per_epoch is None else int(samples_per_epoch)
        self.length = requested // global_batch * global_batch
        if self.length == 0:
            raise ValueError(f"the mixture draws {requested} samples per epoch: too few for one global batch of "
                             f"{global_batch} (per-device batch x world size); raise data_mixture.samples_per_epoch "
                             "or lower --per-device-batch-size")
        self.counts = apportion(self.length, self.shares())

    def shares(self) -> list[float]:
        """Each entry's requested share of the draws (sums to 1)."""
        if self.weighting == "dataset":
            raw = self.weights
        elif self.weighting == "frames":
            raw = [w * n for w, n in zip(self.weights, self.sizes, strict=True)]
        elif self.weighting == "trajectory":
            raw = [w * len(b) for w, b in zip(self.weights, self.blocks, strict=True)]
        else:
            raise ValueError(f"weighting must be dataset, frames or trajectory (got {self.weighting!r})")
        total = sum(raw)
        return [r / total for r in raw]

    def __len__(self) -> int:
        return self.length

    @property
    def signature(self) -> str:
        """A digest of everything the order depends on (a resume with another mixture is refused)."""
        record = [self.sizes, self.weights, self.weighting, self.seed, self.length, self.shuffle, self.streaming,
                  [len(b) for b in self.blocks]]
        return hashlib.sha256(json.dumps(record).encode()).hexdigest()[:16]

    def _visit(self, entry: int, epoch: int, k: int) -> np.ndarray:
        """Pass ``k`` over the entry's samples in this epoch (local indices); pass 0 of entry 0 is the single
        dataset's epoch order."""
        seed = _entry_seed(self.seed + k, epoch, entry)
        if self.streaming:
            return np.asarray(streaming_order(self.blocks[entry], seed=seed, shuffle=self.shuffle,
                                              window_blocks=self.streaming_window_blocks), dtype=np.int64)
        if self.shuffle:
            return torch.randperm(self.sizes[entry], generator=torch.Generator().manual_seed(seed)).numpy()
        return np.arange(self.sizes[entry], dtype=np.int64)

    @staticmethod
    def _passes(count: int, visit: Callable[[int], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """``count`` draws from passes ``visit(0), visit(1), ...``: (local indices, pass number of each)."""
        chunks, passes, done, k = [], [], 0, 0
        while done < count:
            take = visit(k)[: count - done]
            chunks.append(take.astype(np.int64))
            passes.append(np.full(len(take), k, dtype=np.int64))
            done += len(take)
            k += 1
        if not chunks:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(chunks), np.concatenate(passes)

    def _entry_draws(self, entry: int, epoch: int) -> np.ndarray:
        """Entry ``entry``'s draws of ``epoch`` as virtual indices, in its order."""
        count = self.counts[entry]
        if self.weighting != "trajectory":
            local, passes = self._passes(count, lambda k: self._visit(entry, epoch, k))
        else:
            local, passes = self._trajectory_draws(entry, count,
                                                   torch.Generator().manual_seed(_entry_seed(self.seed, epoch, entry)))
        return passes * self.total + self.offsets[entry] + local

    def _trajectory_draws(self, entry: int, count: int, generator: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``count`` draws split evenly over the entry's episodes (trajectory weighting)."""
        blocks = self.blocks[entry]
        per_episode = np.full(len(blocks), count // len(blocks), dtype=np.int64)
        lucky = torch.randperm(len(blocks), generator=generator)[: count % len(blocks)].numpy()
        per_episode[lucky] += 1
        if self.streaming:
            episode_order = torch.randperm(len(blocks), generator=generator).tolist() if self.shuffle \
                else list(range(len(blocks)))
        else:
            episode_order = list(range(len(blocks)))
        local_parts, pass_parts = [], []
        for b in episode_order:
            start, stop = blocks[b]

            def visit(k: int, start: int = start, stop: int = stop) -> np.ndarray:
                if self.shuffle:
                    return start + torch.randperm(stop - start, generator=generator).numpy()
                return np.arange(start, stop, dtype=np.int64)

            local, passes = self._passes(int(per_episode[b]), visit)
            local_parts.append(local)
            pass_parts.append(passes)
        local = np.concatenate(local_parts) if local_parts else np.zeros(0, dtype=np.int64)
        passes = np.concatenate(pass_parts) if pass_parts else np.zeros(0, dtype=np.int64)
        if self.shuffle and not self.streaming:
            permutation = torch.randperm(len(local), generator=generator).numpy()
            local, passes = local[permutation], passes[permutation]
        return local, passes

    def labels(self, epoch: int) -> np.ndarray:
        """The entry of each position of the epoch (module docstring, step 3)."""
        labels = np.repeat(np.arange(len(self.sizes), dtype=np.int64), self.counts)
        if len(self.sizes) == 1:
            return labels
        if self.shuffle:
            from embodied_core.data.loader import sample_seed

            generator = torch.Generator().manual_seed(sample_seed(self.seed, epoch, -3))
            return labels[torch.randperm(len(labels), generator=generator).numpy()]
        keys = np.concatenate([(np.arange(c) + 0.5) / c for c in self.counts if c > 0])
        entries = np.concatenate([np.full(c, e) for e, c in enumerate(self.counts) if c > 0])
        return entries[np.lexsort((entries, keys))]

    def __call__(self, epoch: int) -> list[int]:
        """The epoch's global order of virtual indices (length ``len(self)``)."""
        labels = self.labels(epoch)
        order = np.empty(len(labels), dtype=np.int64)
        for entry in range(len(self.sizes)):
            order[labels == entry] = self._entry_draws(entry, epoch)
        return order.tolist()

    def entry_of(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """The entry each virtual index belongs to."""
        local = np.asarray(indices, dtype=np.int64) % self.total
        return np.searchsorted(self.offsets, local, side="right") - 1
