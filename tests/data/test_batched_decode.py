"""Batched decoding (``LeRobotDataset.decode_batch``) gives the samples a per-sample read gives, bit for bit.

Real data: the shared ``lerobot_written/v30`` (two AV1 cameras, episodes sharing files) and ``lingzu_pi05_v30``
(MPEG-4 640x480), the real torchcodec backend, the real ``ResumableLoader`` with 0 and 2 workers, the real image
augmentation and a transform that draws from every global RNG. The per-sample side is the same dataset behind a
proxy without ``decode_batch`` (so the loader reads it sample by sample, as before batched decoding). Overlapping
windows: camera history windows (``delta_timestamps``) and cosmos3's full-window sample index (9 consecutive frames
per sample, a video model's sampling).
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from embodied_core.config.image_augmentation import ImageAugmentationConfig
from embodied_core.data.default_task import with_default_task
from embodied_core.data.image_augmentation import build_ops, resolve_augmentation
from embodied_core.data.image_augmentation.pipeline import ImageAugmentation
from embodied_core.data.loader import ResumableLoader
from embodied_core.data.samplers import cyclic_sampler
from embodied_core.errors import DataError
from embodied_core.model_api import collate_samples
from embodied_data.lerobot.dataset import LeRobotDataset
from embodied_data.video.base import DecodedFrames
from embodied_data.video.torchcodec_backend import TorchCodecBackend
from embodied_models.cosmos3.data.reader import FullWindowIndexBuilder
from tests.support import DATASETS_DIR

V30 = DATASETS_DIR / "lerobot_written" / "v30"
LINGZU = DATASETS_DIR / "lingzu_pi05_v30"
FRONT, WRIST = "observation.images.front", "observation.images.wrist"
FRONT_0 = "videos/observation.images.front/chunk-000/file-000.mp4"  # episodes 0-1
FPS = 30.0
HISTORY = [-4 / FPS, -3 / FPS, -2 / FPS, -1 / FPS, 0.0]  # 5 frames ending now: neighbours' windows overlap


class CountingBackend(TorchCodecBackend):
    """The torchcodec backend, counting its decode calls and the timestamps asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []

    def decode(self, path: str | Path, timestamps: Sequence[float]) -> DecodedFrames:
        self.calls.append((str(path), len(timestamps)))
        return super().decode(path, timestamps)


class PerSample:
    """``dataset`` without ``decode_batch``: the loader reads it sample by sample."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.dataset[index]


def _windows(root: Path = V30, **kwargs: Any) -> LeRobotDataset:
    return LeRobotDataset(root, delta_timestamps={FRONT: HISTORY, WRIST: HISTORY, "action": [0.0, 1 / FPS]},
                          video_backend=CountingBackend(), **kwargs)


def _assert_same(a: Any, b: Any, where: str) -> None:
    """Equal values, dtypes, shapes and strides (tensors), recursively."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), where
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert a.stride() == b.stride(), f"{where}: strides {a.stride()} vs {b.stride()}"
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}[{key}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_a_batch_of_overlapping_windows_is_decoded_once_per_file_and_equals_per_sample_reads() -> None:
    batched, single = _windows(), _windows()
    positions = [40, 3, 41, 44, 0, 42, 100, 36, 95, 60]  # windows of episode 1 overlap; 0 and 36 pad at the start
    samples = batched.__getitems__(positions)
    for position, sample in zip(positions, samples, strict=True):
        _assert_same(sample, single[position], f"position {position}")
    assert samples[0][FRONT].shape == (5, 3, 120, 160)
    # one call per file (front/wrist x the two files the positions touch), each frame asked for once
    files = {path for path, _ in batched.backend.calls}
    assert len(batched.backend.calls) == len(files) == 4
    wanted = {(str(p), t) for pos in positions for p, times in batched.video_reads(pos) for t in times}
    assert sum(n for _, n in batched.backend.calls) == len(wanted) < 5 * 2 * len(positions)
    assert len(single.backend.calls) == 2 * len(positions)


def test_cosmos3_full_windows_and_single_frames_match_per_sample_reads() -> None:
    index = FullWindowIndexBuilder(window=9, keys=(FRONT, WRIST, "action"))
    batched = LeRobotDataset(V30, sample_index=index, video_backend=CountingBackend())
    single = LeRobotDataset(V30, sample_index=index)
    positions = [10, 11, 12, 13, 50, 5, 14, 70]
    for position, sample in zip(positions, batched.__getitems__(positions), strict=True):
        _assert_same(sample, single[position], f"window {position}")
    assert sum(n for _, n in batched.backend.calls) < 9 * 2 * len(positions)
    current = LeRobotDataset(LINGZU, episodes=[3, 4], camera_keys=["image"])
    reference = LeRobotDataset(LINGZU, episodes=[3, 4], camera_keys=["image"])
    positions = [7, 300, 8, 7, 500, 12]  # position 7 twice
    samples = current.__getitems__(positions)
    for position, sample in zip(positions, samples, strict=True):
        _assert_same(sample, reference[position], f"lingzu {position}")
    samples[0]["image"].zero_()  # a sample owns its frames: a transform may change them in place
    assert samples[3]["image"].any() and torch.equal(samples[3]["image"], reference[7]["image"])


def _noisy(sample: dict[str, Any]) -> dict[str, Any]:
    """A sample transform that draws from torch, random and numpy (seeded per sample by the loader)."""
    draws = torch.tensor([torch.rand(()).item(), random.random(), float(np.random.rand())])
    return {"index": sample["index"], FRONT: sample[FRONT].float() + draws[0], WRIST: sample[WRIST],
            "action": sample["action"], "draws": draws, "task": sample["task"]}


def _loader(dataset: Any, workers: int) -> ResumableLoader:
    settings = resolve_augmentation(ImageAugmentationConfig(preset="lerobot"), cameras=[FRONT, WRIST])
    assert settings is not None
    augmentation = ImageAugmentation(settings, build_ops(settings), seed=3, camera_keys=[FRONT, WRIST])
    return ResumableLoader(dataset, batch_size=6, share_fn=cyclic_sampler(0, 1), seed=11, sample_transform=_noisy,
                           collate_fn=collate_samples, augmentation=augmentation, num_workers=workers)


def _batches(loader: ResumableLoader, count: int) -> list[Any]:
    iterator = iter(loader)
    try:
        return [next(iterator) for _ in range(count)]
    finally:
        loader.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [0, 2])
def test_the_loader_gives_the_per_sample_batches_with_augmentation_seeds_and_resume(workers: int) -> None:
    dataset = with_default_task(_windows(episodes=[0, 1, 3]), "fallback")
    expected = _batches(_loader(PerSample(dataset), 0), 5)  # 5 of epoch 0's 19 batches (115 samples)
    got = _batches(_loader(dataset, workers), 5)
    for i, (a, b) in enumerate(zip(expected, got, strict=True)):
        _assert_same(dict(a), dict(b), f"batch {i}")
    first = _loader(dataset, workers)
    iterator = iter(first)
    head = [next(iterator) for _ in range(2)]
    state = first.state_dict()
    first.close()
    resumed = _loader(dataset, workers)
    resumed.load_state_dict(state)
    for i, (a, b) in enumerate(zip(expected, head + _batches(resumed, 3), strict=True)):
        _assert_same(dict(a), dict(b), f"resumed batch {i}")


@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_a_bad_video_raises_the_per_sample_error_naming_the_file(damage: str, tmp_path: Path) -> None:
    root = tmp_path / "v30"
    shutil.copytree(V30, root)
    batched = LeRobotDataset(root, camera_keys=[FRONT])
    single = LeRobotDataset(root, camera_keys=[FRONT])
    video = root / FRONT_0
    if damage == "truncated":
        data = video.read_bytes()
        video.write_bytes(data[: len(data) // 2])
    else:
        video.unlink()
    positions = [1, 60, 2, 100]  # 100 (episode 3) is in another file
    with pytest.raises(DataError) as per_sample:
        [single[position] for position in positions]  # read one by one until the error
    with pytest.raises(DataError) as together:
        batched.__getitems__(positions)
    assert type(together.value) is type(per_sample.value)
    assert str(together.value) == str(per_sample.value)
    assert str(video) in str(together.value)


def _shared_flags(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """collate_samples in the worker, plus whether each stacked tensor already lives in shared memory there."""
    batch = collate_samples(samples)
    return {"batch": batch, "shared": {key: value.is_shared() for key, value in batch.items()
                                       if isinstance(value, torch.Tensor)}}


def test_workers_stack_frames_straight_into_shared_memory() -> None:
    dataset = LeRobotDataset(LINGZU, episodes=[3], camera_keys=["image"])
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=1, collate_fn=_shared_flags)
    got = next(iter(loader))
    assert got["shared"]["image"]  # no copy into shared memory when the worker sends the batch
    assert not got["shared"]["index"]  # small tensors: plain memory (they travel pickled with the trainer's loader)
    expected = collate_samples([dataset[i] for i in range(4)])
    _assert_same(dict(expected), dict(got["batch"]), "batch")
