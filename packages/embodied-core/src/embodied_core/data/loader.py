"""A resumable, epoch-based DataLoader for map-style datasets.

State is ``(epoch, position)``: the epoch number and how many samples of this rank's share of the epoch
were handed to the trainer. Resuming rebuilds the epoch's order from ``(seed, epoch)`` and starts at
``position`` without decoding skipped samples, so a resumed run sees exactly the batches an
uninterrupted run would have seen. Per-sample randomness (augmentations) is seeded from
``(seed, epoch, index)``, never from the trainer's global RNG, so it does not depend on worker count.
With ``streaming=True`` the epoch order visits the dataset episode block by block (``streaming.py``); its state
is the same ``(epoch, position)``.

One DataLoader serves every epoch and its workers persist (``persistent_workers``): a worker imports its
decoders and opens its files once per run, not once per epoch. Each epoch (and a resume) only hands the
loader's sampler that epoch's remaining keys; the DataLoader deals the batches to the workers round-robin and
returns them in order, so the batches do not depend on the worker count and a resumed run reproduces the
uninterrupted one. Workers seeded with ``seed_workers`` are seeded once, from the epoch they started in.

A batch is fetched whole (the DataLoader's ``__getitems__``). A dataset may decode what the batch's samples share
once, up front: when it has ``decode_batch(indices)`` (a context manager, e.g. ``LeRobotDataset.decode_batch``:
the batch's video frames, one decoder call per file), the samples are read inside it, still one by one and each
under its own seed, so they are the samples a per-sample read gives. ``torch.utils.data.Subset`` and wrappers
that forward the method (``DefaultTaskDataset``) keep it.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, Subset

from embodied_core.data import allocator, segment_pool
from embodied_core.data.samplers import ShareFn
from embodied_core.data.streaming import episode_blocks, streaming_order
from embodied_core.data.transport import PackingCollate, unpack_small_tensors
from embodied_core.data.worker_errors import WorkerFailure, in_worker, raise_if_failure
from embodied_core.errors import EmbodiedError

__all__ = ["EpochOrder", "ResumableLoader", "batch_decoding", "sample_seed"]


@runtime_checkable
class EpochOrder(Protocol):
    """An epoch order given to :class:`ResumableLoader` (``order=``): the same order for the same epoch, always."""

    signature: str
    """What the order depends on, as a short string (stored in the loader state)."""

    def __len__(self) -> int:
        """Indices per epoch (before the split over ranks)."""
        ...

    def __call__(self, epoch: int) -> list[int]:
        """The epoch's global order of dataset indices."""
        ...


def batch_decoding(dataset: Any, indices: Sequence[int]) -> contextlib.AbstractContextManager[Any]:
    """``dataset.decode_batch(indices)`` when the dataset has it (through ``Subset``), else a no-op context."""
    while isinstance(dataset, Subset):
        indices = [dataset.indices[i] for i in indices]
        dataset = dataset.dataset
    decode_batch = getattr(dataset, "decode_batch", None)
    return decode_batch(list(indices)) if callable(decode_batch) else contextlib.nullcontext()


def sample_seed(seed: int, epoch: int, index: int) -> int:
    """A 63-bit seed for one sample of one epoch (stable across processes and worker counts)."""
    mixed = (seed * 0x9E3779B97F4A7C15 + epoch * 0xBF58476D1CE4E5B9 + index * 0x94D049BB133111EB)
    return mixed % (2**63 - 1)


class _SeededTransformDataset(Dataset):
    """Applies the image augmentation (seeded by itself) and the sample transform under RNG state derived from
    ``(seed, epoch, index)``."""

    def __init__(self, dataset: Any, transform: Callable[[dict[str, Any]], dict[str, Any]] | None,
                 seed: int, augmentation: Callable[..., dict[str, Any]] | None = None) -> None:
        self.dataset = dataset
        self.transform = transform
        self.seed = seed
        self.augmentation = augmentation

    def __len__(self) -> int:
        return len(self.dataset)

    def _seeded_sample(self, key: tuple[int, int]) -> dict[str, Any]:
        epoch, index = key
        seed = sample_seed(self.seed, epoch, index)
        # CPU generator only: torch.manual_seed would also seed every accelerator RNG (outside fork_rng's
        # devices, so left changed) and costs milliseconds per sample when none is initialized.
        torch.default_generator.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed % 2**32)
        return self.transform(self._augmented(key))

    def _augmented(self, key: tuple[int, int]) -> dict[str, Any]:
        # The augmentation draws from its own per-sample seed inside fork_rng, so the transform's stream is the
        # same with and without it.
        epoch, index = key
        sample = self.dataset[index]
        return sample if self.augmentation is None else self.augmentation(sample, epoch=epoch, index=index)

    def __getitem__(self, key: tuple[int, int]) -> dict[str, Any] | WorkerFailure:
        samples = self.__getitems__([key])
        return samples if isinstance(samples, WorkerFailure) else samples[0]

    def __getitems__(self, keys: Sequence[tuple[int, int]]) -> list[dict[str, Any]] | WorkerFailure:
        """A whole batch (the DataLoader's batched fetch) under one save/restore of the global RNGs: saving
        and restoring NumPy's state costs ~0.1-0.2 ms, too much to pay per sample.

        In a DataLoader worker, an :class:`EmbodiedError` (a bad file, ...) is returned as a
        :class:`WorkerFailure` that the loader re-raises as itself (``worker_errors.py``).
        """
        try:
            return self._samples(keys)
        except EmbodiedError as exc:
            if not in_worker():
                raise
            return WorkerFailure(exc)

    def _samples(self, keys: Sequence[tuple[int, int]]) -> list[dict[str, Any]]:
        with batch_decoding(self.dataset, [index for _, index in keys]):
            if self.transform is None:  # no transform, no randomness to seed: the samples as the dataset gives them
                return [self._augmented(key) for key in keys]
            py_state, np_state = random.getstate(), np.random.get_state()
            with torch.random.fork_rng(devices=[]):
                try:
                    return [self._seeded_sample(key) for key in keys]
                finally:
                    random.setstate(py_state)
                    np.random.set_state(np_state)


class _WorkerStart:
    """A DataLoader worker's ``worker_init_fn`` (picklable for spawn): ``keep_memory`` applies
    :func:`~embodied_core.data.allocator.keep_batch_memory`; ``releases`` (the main process's
    :class:`~embodied_core.data.segment_pool.SegmentReleases` table) gives the worker a segment pool; ``seed``
    (``seed_workers``) seeds the worker's global RNGs from ``(seed, epoch, worker_id)``."""

    def __init__(self, seed: int | None, epoch: int, *, keep_memory: bool,
                 releases: torch.Tensor | None = None) -> None:
        self.seed = seed
        self.epoch = epoch
        self.keep_memory = keep_memory
        self.releases = releases

    def __call__(self, worker_id: int) -> None:
        if self.keep_memory:
            allocator.keep_batch_memory()
        if self.releases is not None:
            segment_pool.install_worker_pool(worker_id, self.releases)
        if self.seed is None:
            return
        seed = sample_seed(self.seed, self.epoch, 10_000_000 + worker_id)
        torch.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed % 2**32)


class _EpochKeys(Sampler):
    """The persistent DataLoader's sampler: the ``(epoch, index)`` keys of the epoch being read, set before each
    pass (the sampler is iterated in the main process, so workers need not know about epochs)."""

    def __init__(self) -> None:
        self.keys: list[tuple[int, int]] = []

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self.keys)

    def __len__(self) -> int:
        return len(self.keys)


_EPOCH_END = object()


class ResumableLoader:
    """Endless iterator of collated batches over epochs, with ``state_dict``/``load_state_dict``.

    Args:
        dataset: a map-style dataset returning sample dicts.
        batch_size: samples per batch (per rank).
        share_fn: maps the epoch's global order to this rank's indices (a sampler plugin).
        seed: seeds the epoch order and per-sample randomness.
        sample_transform, collate_fn: the model's data pipeline.
        augmentation: ``augmentation(sample, epoch=, index=) -> sample``, applied to each sample before
            ``sample_transform`` (the image augmentation, which seeds its own draws per sample).
        shuffle: shuffle each epoch (seeded by ``(seed, epoch)``); False reads the dataset in its own order.
        drop_last: drop the last incomplete batch of each epoch; False ends each epoch with a smaller batch.
        rank_seed: added to ``seed`` for the per-sample and worker randomness (augmentations) only, not for the
            epoch order (``--set-seed-by-rank`` passes the rank offset; the order stays one permutation split
            over ranks).
        num_workers, multiprocessing_context, seed_workers: DataLoader worker settings; ``seed_workers``
            seeds each worker's global RNGs from ``(seed, epoch, worker_id)``.
        streaming: read the dataset episode block by block (``streaming.py``); the state records the mode,
            since its order differs from the map-style one.
        episode_ranges: the dataset's ``(start, stop)`` episode ranges (``TrainingDataset.episode_ranges()``),
            the blocks streaming reads; None: fixed runs of ``streaming_block_size``.
        streaming_block_size, streaming_window_blocks: block length without ``episode_ranges``, and how many
            blocks are shuffled together.
        order: the epoch order itself, in place of the shuffled / streaming one (an :class:`EpochOrder`, e.g. a
            dataset mixture's schedule): ``order(epoch)`` gives the epoch's global order of dataset indices, split
            over ranks by ``share_fn``; its ``signature`` is part of the state, so a resume with another order is
            refused.
        keep_batch_memory: tune the reading processes' malloc so batch-sized blocks are reused rather than mapped
            afresh for every batch (:mod:`embodied_core.data.allocator`; glibc only, and not where the environment
            tunes malloc itself), and let workers reuse the shared-memory segments of batches the trainer has
            dropped (:mod:`embodied_core.data.segment_pool`).
    """

    def __init__(
        self,
        dataset: Any,
        *,
        batch_size: int,
        share_fn: ShareFn,
        seed: int,
        sample_transform: Callable[[dict[str, Any]], dict[str, Any]] | None,
        collate_fn: Callable[[Sequence[Mapping[str, Any]]], Any],
        augmentation: Callable[..., dict[str, Any]] | None = None,
        shuffle: bool = True,
        drop_last: bool = True,
        rank_seed: int = 0,
        num_workers: int = 0,
        multiprocessing_context: str | None = None,
        seed_workers: bool = False,
        pin_memory: bool = False,
        streaming: bool = False,
        episode_ranges: Sequence[tuple[int, int]] | None = None,
        streaming_block_size: int = 64,
        streaming_window_blocks: int = 4,
        order: EpochOrder | None = None,
        keep_batch_memory: bool = True,
    ) -> None:
        self._dataset = _SeededTransformDataset(dataset, sample_transform, seed + rank_seed, augmentation)
        self.batch_size = batch_size
        self.share_fn = share_fn
        self.seed = seed
        self.rank_seed = rank_seed
        self.collate_fn = collate_fn
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.num_workers = num_workers
        self.multiprocessing_context = multiprocessing_context if num_workers > 0 else None
        self.seed_workers = seed_workers
        self.pin_memory = pin_memory
        self.streaming = streaming
        self.epoch = 0
        self.position = 0
        self._blocks = episode_blocks(episode_ranges, len(dataset), streaming_block_size) if streaming else []
        self.streaming_window_blocks = streaming_window_blocks
        self.order = order
        self.keep_batch_memory = keep_batch_memory
        self._keys = _EpochKeys()
        self._loader: DataLoader | None = None
        self._releases: segment_pool.SegmentReleases | None = None
        if self.batches_per_epoch() == 0:
            raise ValueError(f"the dataset has {len(dataset)} samples: too few for one batch of {batch_size} "
                             "per rank; lower --per-device-batch-size, use more data or --no-batch-drop-last")

    def epoch_indices(self, epoch: int) -> list[int]:
        """This rank's indices of ``epoch``, in order."""
        n = len(self._dataset)
        if self.order is not None:
            order = self.order(epoch)
        elif self.streaming:
            order = streaming_order(self._blocks, seed=sample_seed(self.seed, epoch, -1), shuffle=self.shuffle,
                                    window_blocks=self.streaming_window_blocks)
        elif self.shuffle:
            generator = torch.Generator().manual_seed(sample_seed(self.seed, epoch, -1))
            order = torch.randperm(n, generator=generator).tolist()
        else:
            order = list(range(n))
        return self.share_fn(order)

    def batches_per_epoch(self) -> int:
        """Batches per epoch on this rank (with ``drop_last``, full batches only)."""
        length = len(self.order) if self.order is not None else len(self._dataset)
        return -(-self._usable(len(self.share_fn(list(range(length))))) // self.batch_size)

    def _usable(self, num_indices: int) -> int:
        """How many of an epoch's ``num_indices`` indices are read (whole batches only with ``drop_last``)."""
        return num_indices // self.batch_size * self.batch_size if self.drop_last else num_indices

    def _epoch_keys(self) -> list[tuple[int, int]]:
        """The keys of the current epoch from ``position`` on (whole batches only with ``drop_last``)."""
        indices = self.epoch_indices(self.epoch)
        return [(self.epoch, i) for i in indices[self.position : self._usable(len(indices))]]

    def _build_loader(self) -> DataLoader:
        self._releases = (segment_pool.SegmentReleases(self.num_workers)
                          if self.num_workers > 0 and self.keep_batch_memory else None)
        return DataLoader(
            self._dataset,
            batch_size=self.batch_size,
            sampler=self._keys,
            collate_fn=PackingCollate(self.collate_fn) if self.num_workers > 0 else self.collate_fn,
            num_workers=self.num_workers,
            multiprocessing_context=self.multiprocessing_context,
            worker_init_fn=_WorkerStart(self.seed + self.rank_seed if self.seed_workers else None, self.epoch,
                                        keep_memory=self.keep_batch_memory,
                                        releases=self._releases.table if self._releases is not None else None),
            persistent_workers=self.num_workers > 0,
            pin_memory=self.pin_memory,
            drop_last=self.drop_last,
            # A DataLoader draws its workers' base seed from this generator when its workers start; without one
            # it would draw from the global torch RNG, so a resumed run (which starts its workers mid-run) would
            # shift the model's random stream and no longer reproduce the uninterrupted run.
            generator=torch.Generator().manual_seed(sample_seed(self.seed, self.epoch, -2)),
        )

    def __iter__(self) -> Iterator[Any]:
        try:
            yield from self._batches()
        except Exception:
            # A failed read (a worker's DataError, a bad sample) ends this iteration: stop the workers now. Left to
            # the garbage collector, the DataLoader iterator dies with the exception's reference cycle, after the
            # queues torch signals its workers through were finalized, and its shutdown then waits 5 s per worker.
            self.close()
            raise

    def _batches(self) -> Iterator[Any]:
        while True:
            keys = self._epoch_keys()
            epoch_length = self.position + len(keys)
            self._keys.keys = keys
            if self._loader is None:
                if self.keep_batch_memory and self.num_workers == 0:
                    allocator.keep_batch_memory()  # this process reads the data; workers apply it as they start
                self._loader = self._build_loader()
            batches = iter(self._loader)
            while (batch := self._next_batch(batches)) is not _EPOCH_END:
                self.position = min(self.position + self.batch_size, epoch_length)  # the last batch may be short
                yield batch
                del batch  # before the next fetch, so the pooled segments of a batch the caller dropped come back
            self.epoch += 1
            self.position = 0

    def _next_batch(self, batches: Iterator[Any]) -> Any:
        """The DataLoader's next batch as the trainer gets it, or ``_EPOCH_END``."""
        if self._releases is not None:
            self._releases.release_expired()
        try:
            batch = next(batches)
        except StopIteration:
            return _EPOCH_END
        raise_if_failure(batch)
        if self.num_workers == 0:
            return batch
        if self._releases is not None:
            batch = self._releases.receive(batch)
        return unpack_small_tensors(batch)

    def close(self) -> None:
        """Stops the persistent workers now (they also stop when an iteration fails and when the loader is garbage
        collected); a later iteration starts new ones."""
        loader, self._loader = self._loader, None
        self._releases = None
        iterator = getattr(loader, "_iterator", None)
        if iterator is not None and hasattr(iterator, "_shutdown_workers"):
            iterator._shutdown_workers()

    def state_dict(self) -> dict[str, int]:
        """Position of the next batch: epoch and samples already consumed in it on this rank."""
        state = {"epoch": self.epoch, "position": self.position, "seed": self.seed, "batch_size": self.batch_size,
                 "streaming": self.streaming, "rank_seed": self.rank_seed, "drop_last": self.drop_last}
        if self.order is not None:
            state["order"] = self.order.signature
        return state

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        """Continues from a saved position; refuses a state saved with another seed, batch size or mode."""
        for key, flags in (("seed", "--seed"), ("batch_size", "--per-device-batch-size"),
                           ("rank_seed", "--set-seed-by-rank"), ("drop_last", "--batch-drop-last")):
            if state.get(key, getattr(self, key)) != getattr(self, key):
                raise ValueError(f"dataloader state was saved with {key}={state[key]}, this run uses "
                                 f"{getattr(self, key)}; resume with the same {flags}")
        if bool(state.get("streaming", False)) != self.streaming:
            raise ValueError(f"dataloader state was saved with streaming={bool(state.get('streaming', False))}, this "
                             f"run uses streaming={self.streaming}; the sample order differs, so resume with the "
                             "same --streaming setting")
        saved_order = state.get("order")
        order = self.order.signature if self.order is not None else None
        if saved_order != order:
            raise ValueError(f"dataloader state was saved with epoch order {saved_order or 'of one dataset'}, this "
                             f"run uses {order or 'one dataset'}: the dataset mixture (entries, sizes, weights, "
                             "weighting, seed or samples_per_epoch) changed, so the saved position means other "
                             "samples; resume with the same mixture")
        self.epoch = int(state["epoch"])
        self.position = int(state["position"])
