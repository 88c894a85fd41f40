"""Workers reuse the shared-memory segments of batches the trainer dropped (``embodied_core.data.segment_pool``),
and never one the main process can still read."""

from __future__ import annotations

import os
import pickle

import numpy as np
import torch

from embodied_core.data.leaves import iter_leaves
from embodied_core.data.loader import ResumableLoader
from embodied_core.data.samplers import cyclic_sampler
from embodied_core.data.segment_pool import POOL_SLOTS, PooledBatch, SegmentPool, SegmentReleases
from embodied_core.model_api import TensorBatch, collate_samples

_NBYTES = 4096


def _pool(**kwargs: int) -> tuple[SegmentPool, np.ndarray]:
    row = np.zeros(POOL_SLOTS, dtype=np.int64)
    return SegmentPool(0, row, **kwargs), row


def _on(storage: torch.UntypedStorage) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8).set_(storage, 0, (storage.nbytes(),))


def test_a_slot_is_handed_out_again_only_after_its_token_comes_back() -> None:
    pool, row = _pool()
    first = pool.storage(_NBYTES)
    [(position, slot, token)] = pool.dispatch({"task": ["a"], "image": _on(first)})
    assert position == 0 and token > 0
    second = pool.storage(_NBYTES)
    assert second.data_ptr() != first.data_ptr()  # still in use by the main process
    pool.dispatch([_on(second)])
    row[slot] = token  # the main process dropped the first batch
    again = pool.storage(_NBYTES - 100)  # a smaller request fits (at most twice the size)
    assert again.data_ptr() == first.data_ptr()


def test_a_segment_the_batch_does_not_carry_leaves_the_pool() -> None:
    pool, _ = _pool()
    kept = pool.storage(_NBYTES)  # e.g. a collate function's intermediate, maybe still held in the worker
    assert pool.dispatch({"other": torch.zeros(3)}) == []
    assert pool.storage(_NBYTES).data_ptr() != kept.data_ptr()


def test_past_its_limits_the_pool_hands_out_unpooled_segments() -> None:
    pool, _ = _pool(max_bytes=2 * _NBYTES)
    pooled = [pool.storage(_NBYTES), pool.storage(_NBYTES)]
    unpooled = pool.storage(_NBYTES)
    sent = pool.dispatch([_on(s) for s in [*pooled, unpooled]])
    assert [position for position, _, _ in sent] == [0, 1]
    full, _ = _pool(max_bytes=1 << 40)
    for _ in range(POOL_SLOTS):
        full.dispatch(_on(full.storage(64)))  # every slot sent, none back
    assert full.dispatch(_on(full.storage(64))) == []


def test_positions_name_the_same_leaves_after_a_pickle() -> None:
    batch = TensorBatch({"state": torch.zeros(2), "frames": [torch.ones(3), (torch.full((2,), 7.0), "x")]})
    assert [leaf.tolist() for leaf in iter_leaves(batch)] == [[0.0, 0.0], [1.0, 1.0, 1.0], [7.0, 7.0]]
    arrived = pickle.loads(pickle.dumps(PooledBatch(batch, 1, [(2, 5, 9)])))
    [(worker_id, slot, token, ref)] = arrived.watched
    assert (worker_id, slot, token) == (1, 5, 9) and not ref.expired()
    releases = SegmentReleases(2)
    received = releases.receive(arrived)
    assert isinstance(received, TensorBatch) and releases.release_expired() == 0
    del arrived, received
    assert releases.release_expired() == 1 and releases.table[1, 5].item() == 9


class _Frames(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 96

    def __getitem__(self, index: int) -> dict:
        return {"image": torch.full((3, 96, 96), index % 251, dtype=torch.uint8), "index": index}


def _loader(workers: int, *, keep_batch_memory: bool = True) -> ResumableLoader:
    return ResumableLoader(_Frames(), batch_size=4, share_fn=cyclic_sampler(0, 1), seed=5, sample_transform=None,
                           collate_fn=collate_samples, num_workers=workers, keep_batch_memory=keep_batch_memory)


def _segment(tensor: torch.Tensor) -> int:
    """The inode of the shared-memory segment ``tensor`` lives on."""
    return os.fstat(tensor.untyped_storage()._share_fd_cpu_()[0]).st_ino


def _distinct_segments(loader: ResumableLoader, batches: int) -> int:
    iterator = iter(loader)
    seen = {_segment(next(iterator)["image"]) for _ in range(batches)}
    loader.close()
    return len(seen)


def test_workers_reuse_the_segments_of_dropped_batches() -> None:
    assert _distinct_segments(_loader(1), 30) <= 6
    assert _distinct_segments(_loader(1, keep_batch_memory=False), 30) == 30


def test_batches_the_caller_keeps_are_never_overwritten() -> None:
    expected = [batch["image"].clone() for batch, _ in zip(_loader(0), range(40), strict=False)]
    loader = _loader(2)
    iterator = iter(loader)
    kept_batches, kept_arrays, kept_views = [], [], []
    for i in range(40):
        batch = next(iterator)
        if i % 3 == 0:
            kept_batches.append((i, batch))
        elif i % 3 == 1:
            kept_arrays.append((i, batch["image"].numpy()))  # only a NumPy view of the segment survives
        else:
            kept_views.append((i, batch["image"][1:]))  # only a slice
        del batch
    loader.close()
    for i, batch in kept_batches:
        assert torch.equal(batch["image"], expected[i])
    for i, array in kept_arrays:
        assert np.array_equal(array, expected[i].numpy())
    for i, view in kept_views:
        assert torch.equal(view, expected[i][1:])
