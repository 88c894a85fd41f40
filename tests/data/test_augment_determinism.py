"""The augmented frames depend only on (--seed, epoch, sample index): the same with 0 or 2 DataLoader workers, on
1 or 2 ranks (in process, and as 2 gloo processes), and after a resume in the middle of an epoch; they change
with the epoch. Real frames: lerobot_written/v30 (AV1 video; a 2-frame window of the 120 x 160 front camera, one
frame of the 72 x 96 wrist camera), the lerobot preset (independent draws per camera)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks.augment_frames import sha256
from embodied_core.config.image_augmentation import ImageAugmentationConfig
from embodied_core.data.image_augmentation import build_ops, resolve_augmentation
from embodied_core.data.image_augmentation.pipeline import ImageAugmentation
from embodied_core.data.loader import ResumableLoader
from embodied_core.data.samplers import ShareFn, cyclic_sampler
from embodied_core.model_api import collate_samples
from embodied_data.lerobot.dataset import LeRobotDataset
from tests.support import DATASETS_DIR, clean_env, run_torchrun

DATASET = DATASETS_DIR / "lerobot_written" / "v30"
CAMERAS = ("observation.images.front", "observation.images.wrist")
BATCH = 4
SAMPLES = 12  # the first frames of episode 0: 3 batches per epoch


class _First:
    """The first ``count`` samples of a dataset (a map-style dataset itself)."""

    def __init__(self, source: Any, count: int) -> None:
        self.source, self.count = source, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.source[index]


@cache
def dataset() -> _First:
    return _First(LeRobotDataset(DATASET, episodes=[0], delta_timestamps={CAMERAS[0]: [-1 / 30, 0.0]}), SAMPLES)


def augmentation(seed: int = 11) -> ImageAugmentation:
    settings = resolve_augmentation(ImageAugmentationConfig(preset="lerobot"), cameras=CAMERAS)
    assert settings is not None
    return ImageAugmentation(settings, build_ops(settings), seed=seed, camera_keys=CAMERAS)


def loader(*, num_workers: int = 0, share_fn: ShareFn | None = None, seed: int = 11) -> ResumableLoader:
    return ResumableLoader(dataset(), batch_size=BATCH, share_fn=share_fn or cyclic_sampler(0, 1), seed=seed,
                           sample_transform=None, collate_fn=collate_samples, augmentation=augmentation(seed),
                           num_workers=num_workers, drop_last=True)


def batches(source: ResumableLoader, count: int) -> list[Any]:
    iterator = iter(source)
    out = [next(iterator) for _ in range(count)]
    source.close()
    return out


def by_index(items: list[Any], epochs: list[int] | None = None) -> dict[tuple[int, int], dict[str, torch.Tensor]]:
    """``{(epoch, sample index): {camera: frames}}`` of the batches (``epochs``: each batch's epoch)."""
    out = {}
    for b, batch in enumerate(items):
        for row, index in enumerate(batch["index"].tolist()):
            out[(0 if epochs is None else epochs[b], index)] = {cam: batch[cam][row] for cam in CAMERAS}
    return out


def epoch_hashes(share_fn: ShareFn) -> dict[str, dict[str, str]]:
    """``{sample index: {camera: sha256}}`` of this rank's share of epoch 0 (the torchrun worker's measurement)."""
    source = loader(share_fn=share_fn)
    frames = by_index(batches(source, source.batches_per_epoch()))
    return {str(index): {cam: sha256(value) for cam, value in cams.items()} for (_, index), cams in frames.items()}


def _equal(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(torch.equal(x[c], y[c]) and torch.equal(x["index"], y["index"])
                                    for x, y in zip(a, b, strict=True) for c in CAMERAS)


@pytest.fixture(scope="module")
def straight() -> list[Any]:
    return batches(loader(), 5)  # 3 batches per epoch: crosses into epoch 1


def test_frames_are_augmented_and_change_with_the_epoch(straight: list[Any]) -> None:
    per_epoch = loader().batches_per_epoch()
    assert per_epoch == 3
    raw = dataset()
    first = by_index(straight[:per_epoch])
    second = by_index(straight[per_epoch:], [1] * (len(straight) - per_epoch))
    changed = 0
    for (_, index), cams in second.items():
        again = first[(0, index)]
        changed += sum(not torch.equal(cams[c], again[c]) for c in CAMERAS)
        sample = raw[index]
        assert all(cams[c].shape == sample[c].shape and not torch.equal(cams[c], sample[c]) for c in CAMERAS)
    assert changed == 2 * len(second)  # another epoch, another draw for every camera


def test_two_workers_give_the_frames_of_none(straight: list[Any]) -> None:
    assert _equal(batches(loader(num_workers=2), len(straight)), straight)


def test_resume_mid_epoch_gives_the_uninterrupted_frames(straight: list[Any]) -> None:
    first = loader()
    head = batches(first, 3)
    resumed = loader(num_workers=2)
    resumed.load_state_dict(first.state_dict())
    assert _equal(head + batches(resumed, len(straight) - 3), straight)


def test_each_rank_gives_a_sample_the_frames_of_one_rank(straight: list[Any]) -> None:
    single = by_index(straight[:3])
    for rank in (0, 1):
        part = loader(share_fn=cyclic_sampler(rank, 2))
        frames = by_index(batches(part, part.batches_per_epoch()))
        assert frames and all(torch.equal(cams[c], single[key][c]) for key, cams in frames.items() for c in CAMERAS)


@pytest.mark.distributed
@pytest.mark.timeout(300)
def test_two_gloo_processes_give_the_frames_of_one(tmp_path: Path) -> None:
    out = tmp_path / "hashes.json"
    worker = Path(__file__).with_name("_augment_ranks_worker.py")
    done = run_torchrun("--nproc_per_node=2", "--master_addr=127.0.0.1", f"--master_port={_free_port()}",
                        str(worker), str(out), env=clean_env(OMP_NUM_THREADS="1"), cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    two = json.loads(out.read_text())
    assert two["world_size"] == 2
    one = epoch_hashes(cyclic_sampler(0, 1))
    assert two["hashes"] and set(two["hashes"]) <= set(one)
    assert all(two["hashes"][k] == one[k] for k in two["hashes"])


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
