"""The loader on real video with DataLoader workers: workers persist across epochs, a resume in the second epoch
still reproduces the uninterrupted batches, decoders are imported before workers start, and decoded frames are
stacked in their memory order (equal values, channels-last batch)."""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.utils.data import Subset

from embodied_core.data.loader import ResumableLoader
from embodied_core.data.samplers import cyclic_sampler
from embodied_core.model_api import collate_samples
from embodied_data.lerobot.dataset import LeRobotDataset
from embodied_data.video.base import UnsupportedVideoError, VideoBackend
from embodied_data.video.torchcodec_backend import TorchCodecBackend
from tests.support import DATASETS_DIR

LINGZU = DATASETS_DIR / "lingzu_pi05_v30"
SAMPLES = 24  # 6 batches of 4 per epoch


def _with_pid(sample: dict[str, Any]) -> dict[str, Any]:
    """Tags each sample with the process that decoded it."""
    return {"index": sample["index"], "image": sample["image"], "pid": torch.tensor(os.getpid())}


@pytest.fixture(scope="module")
def frames() -> Subset:
    dataset = LeRobotDataset(LINGZU, episodes=[3], camera_keys=["image"])
    return Subset(dataset, list(range(0, 2 * SAMPLES, 2)))


def _loader(dataset: Subset) -> ResumableLoader:
    return ResumableLoader(dataset, batch_size=4, share_fn=cyclic_sampler(0, 1), seed=5, sample_transform=_with_pid,
                           collate_fn=collate_samples, num_workers=2)


def _take(iterator: Iterator[Any], n: int) -> list[Any]:
    return [next(iterator) for _ in range(n)]


@pytest.mark.timeout(180)
def test_workers_persist_and_a_resume_in_the_second_epoch_is_exact(frames: Subset) -> None:
    # 15 batches: epochs 0 and 1 and half of epoch 2; the resumed run starts at batch 9 (epoch 1, position 12)
    straight_loader = _loader(frames)
    straight = _take(iter(straight_loader), 15)
    straight_loader.close()
    pids = {int(b["pid"][0]) for b in straight}
    assert len(pids) == 2, f"3 epochs read by {len(pids)} worker processes; the 2 workers must persist"
    first = _loader(frames)
    head = _take(iter(first), 9)
    state = first.state_dict()
    first.close()
    assert (state["epoch"], state["position"]) == (1, 12)
    resumed = _loader(frames)
    resumed.load_state_dict(state)
    tail = _take(iter(resumed), 6)
    resumed.close()
    for i, (a, b) in enumerate(zip(straight, head + tail, strict=True)):
        assert torch.equal(a["index"], b["index"]), i
        assert torch.equal(a["image"], b["image"]), i
    epoch1 = sorted(torch.cat([b["index"] for b in straight[6:12]]).tolist())
    assert epoch1 == sorted(int(frames[i]["index"]) for i in range(SAMPLES))


def test_decoded_frames_stack_in_memory_order_with_equal_values(frames: Subset) -> None:
    samples = [frames[i] for i in range(8)]
    assert not samples[0]["image"].is_contiguous()  # torchcodec's NCHW frames are views of NHWC memory
    batch = collate_samples(samples)
    expected = torch.stack([s["image"] for s in samples])
    assert torch.equal(batch["image"], expected)
    assert batch["image"].shape == expected.shape
    assert batch["image"].permute(0, 2, 3, 1).is_contiguous()  # one dense NHWC copy, not a strided gather


class _Backend(VideoBackend):
    """A backend whose decoder module is ``json.tool`` (a module nothing else here imports)."""

    name = "json_tool"
    preload_modules = ("json.tool",)

    def _open(self, path: str) -> Any:
        return path

    def _decode(self, handle: Any, path: str, timestamps: list[float]) -> tuple[torch.Tensor, list[float]]:
        return torch.zeros(len(timestamps), 3, 2, 2, dtype=torch.uint8), list(timestamps)


def test_backends_import_their_decoder_when_built_and_when_unpickled(monkeypatch: pytest.MonkeyPatch) -> None:
    # what forked workers inherit is what the main process imported while building the dataset; a spawned
    # worker imports it when it unpickles the dataset, once, since its workers persist
    assert TorchCodecBackend.preload_modules == ("torchcodec.decoders",)
    monkeypatch.delitem(sys.modules, "json.tool", raising=False)
    backend = _Backend()
    assert "json.tool" in sys.modules
    del sys.modules["json.tool"]
    pickle.loads(pickle.dumps(backend))
    assert "json.tool" in sys.modules
    monkeypatch.setattr(_Backend, "preload_modules", ("embodied_no_such_decoder",))
    with pytest.raises(UnsupportedVideoError, match="video backend 'json_tool': importing embodied_no_such_decoder "
                                                    "failed"):
        _Backend()
