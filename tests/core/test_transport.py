"""Small-tensor transport between DataLoader workers and the trainer: a lossless round trip."""

from __future__ import annotations

import dataclasses
import pickle

import attrs
import torch

from embodied_core.data.loader import ResumableLoader
from embodied_core.data.samplers import cyclic_sampler
from embodied_core.data.transport import INLINE_MAX_BYTES, pack_small_tensors, unpack_small_tensors
from embodied_core.model_api import TensorBatch, collate_samples


@dataclasses.dataclass(frozen=True)
class _FrozenBatch:
    state: torch.Tensor
    extras: dict


@attrs.define
class _AttrsBatch:
    mask: torch.Tensor
    names: list


def _round_trip(batch: object) -> object:
    return unpack_small_tensors(pickle.loads(pickle.dumps(pack_small_tensors(batch))))


def test_round_trip_keeps_types_values_and_large_tensors() -> None:
    big = torch.zeros(INLINE_MAX_BYTES // 4 + 1)
    batch = TensorBatch({"state": torch.randn(8, 2, 7), "pad": torch.zeros(8, 50, dtype=torch.bool),
                         "bf16": torch.ones(3, dtype=torch.bfloat16), "frames": big, "task": ["a", "b"]})
    packed = pack_small_tensors(batch)
    assert packed["frames"] is big and packed["bf16"] is batch["bf16"]  # large / non-NumPy dtypes stay tensors
    assert not isinstance(packed["state"], torch.Tensor)  # small ones travel by value
    out = _round_trip(batch)
    assert type(out) is TensorBatch and out["task"] == ["a", "b"]
    for key in ("state", "pad", "bf16", "frames"):
        assert out[key].dtype == batch[key].dtype and torch.equal(out[key], batch[key])
    frozen = _round_trip(_FrozenBatch(torch.arange(4), {"t": torch.tensor(1.5)}))
    assert torch.equal(frozen.state, torch.arange(4)) and frozen.extras["t"].item() == 1.5
    with_attrs = _round_trip(_AttrsBatch(torch.tensor([True, False]), ["x"]))
    assert with_attrs.mask.tolist() == [True, False] and with_attrs.names == ["x"]


class _Samples(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 32

    def __getitem__(self, index: int) -> dict:
        return {"x": torch.full((3,), float(index)), "i": index, "image": torch.full((3, 64, 64), index % 255,
                                                                                   dtype=torch.uint8)}


def test_worker_batches_equal_in_process_batches() -> None:
    def batches(workers: int) -> list:
        loader = ResumableLoader(_Samples(), batch_size=4, share_fn=cyclic_sampler(0, 1), seed=3,
                                 sample_transform=None, collate_fn=collate_samples, num_workers=workers)
        iterator = iter(loader)
        return [next(iterator) for _ in range(6)]

    for a, b in zip(batches(0), batches(2), strict=True):
        assert type(a) is type(b) and a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) for k in a)
