"""Streaming (``--streaming``): an iterable view of any map-style dataset, read in a locality-friendly order.

A streaming epoch visits the dataset block by block: blocks are the dataset's episodes (its
``TrainingDataset.episode_ranges()``, ``(start, stop)`` index ranges, handed to the loader by core), else fixed
runs of ``block_size`` indices. The block order is shuffled by ``(seed, epoch)`` and the items of each window of
``window_blocks`` consecutive blocks are shuffled together (a deterministic shuffle buffer). Each worker
therefore decodes from a handful of episodes (files) at a time instead of jumping across the dataset,
while batches still mix several episodes.

Sharding: the epoch order is split over ranks by the sampler plugin (cyclic or block), then this rank's
batches are dealt to DataLoader workers round-robin (batch ``b`` to worker ``b % num_workers``), which is
the order in which the DataLoader hands worker batches back. The batches leave the loader in the same
order for any worker count, and resuming at ``position`` only drops the consumed prefix, so a resumed
streaming run is exact like a map-style one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import IterableDataset, get_worker_info

__all__ = ["StreamingShard", "episode_blocks", "streaming_order"]


def episode_blocks(ranges: Sequence[tuple[int, int]] | None, num_samples: int,
                   block_size: int) -> list[tuple[int, int]]:
    """Contiguous ``(start, stop)`` blocks covering ``range(num_samples)``: the episode ``ranges`` when given
    (they must tile the range exactly), else fixed runs of ``block_size``."""
    if ranges:
        blocks = [(int(a), int(b)) for a, b in ranges if b > a]
        covered = sorted(i for a, b in blocks for i in (a, b))
        if blocks and covered[0] == 0 and covered[-1] == num_samples and sum(b - a for a, b in blocks) == num_samples:
            return blocks
        raise ValueError(f"dataset.episode_ranges must tile range({num_samples}) exactly; got {blocks[:4]}...")
    return [(start, min(start + block_size, num_samples)) for start in range(0, num_samples, block_size)]


def streaming_order(blocks: Sequence[tuple[int, int]], *, seed: int, shuffle: bool, window_blocks: int) -> list[int]:
    """The epoch's global index order (``seed`` already mixes the run seed and the epoch)."""
    if not shuffle:
        return [i for start, stop in blocks for i in range(start, stop)]
    generator = torch.Generator().manual_seed(seed)
    block_order = torch.randperm(len(blocks), generator=generator).tolist()
    order: list[int] = []
    for first in range(0, len(block_order), window_blocks):
        window = [i for b in block_order[first : first + window_blocks] for i in range(*blocks[b])]
        permutation = torch.randperm(len(window), generator=generator).tolist()
        order.extend(window[p] for p in permutation)
    return order


class StreamingShard(IterableDataset):
    """This rank's remaining keys of one epoch, dealt to workers by batch.

    Args:
        dataset: map-style dataset indexed by the keys (the loader's seeded-transform wrapper).
        keys: this rank's keys from the resume position on.
        batch_size: batch size; worker ``w`` yields the items of batches ``w, w + W, ...``.
        drop_last: leave out a last incomplete batch of ``keys`` (else it is the last, smaller batch).
    """

    def __init__(self, dataset: Any, keys: Sequence[Any], *, batch_size: int, drop_last: bool = True) -> None:
        self.dataset = dataset
        self.keys = list(keys)
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        worker, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        num_batches = len(self.keys) // self.batch_size if self.drop_last else -(-len(self.keys) // self.batch_size)
        for batch in range(worker, num_batches, num_workers):
            for key in self.keys[batch * self.batch_size : (batch + 1) * self.batch_size]:
                yield self.dataset[key]
