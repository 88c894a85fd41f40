"""``cosmos3_droid`` video at camera sizes the shared golden lacks: a second golden made with LoongForge's own
operations (``benchmarks/cosmos3_droid_sizes.py`` -> ``tests/fixtures/cosmos3_droid_sizes/``).

DROID's 180 x 320, a 240 x 352 view, odd sizes, a canvas the bucket scales down (bicubic) and one in the 9:16 bucket:
the raw canvas (wrist on top, bilinear half-size exterior views below, truncated to uint8), the bucket-fitted video
of the per-sample transform (scaled, reflect / edge padded), and the one-frame policy observation, each equal to the
reference bit for bit, whatever the memory layout of the decoded frames (decoders return channels-last views).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from benchmarks.cosmos3_droid_sizes import OUT, camera_frames
from embodied_models.cosmos3.data.config import DROID_CAMERAS, Cosmos3DataConfig
from embodied_models.cosmos3.data.reader import DroidWindowTransform
from embodied_models.cosmos3.data.transform import make_sample_transform
from tests.support import DATASETS_DIR

TOKENIZER = str(DATASETS_DIR / "strategies" / "tokenizers" / "qwen3vl_tiny")
DOC = json.loads((OUT / "expected.json").read_text())
JOINTS = 7


def _sha(tensor: torch.Tensor) -> str:
    return hashlib.sha256(tensor.contiguous().numpy().tobytes()).hexdigest()


def _where(value: torch.Tensor, case: dict[str, Any], kind: str, crops: dict[str, torch.Tensor]) -> str:
    """Which stored crops of ``kind`` differ, and by how many pixels (the failure message)."""
    out = []
    for key, slices in case["crops"].items():
        if f".{kind}." not in key:
            continue
        part = value[:, :1, ::16, ::16] if slices is None else value[tuple(slice(lo, hi) for lo, hi in slices)]
        if part.shape != crops[key].shape:
            out.append(f"{key}: shape {list(part.shape)} != {list(crops[key].shape)}")
        elif not torch.equal(part, crops[key]):
            diff = (part.int() - crops[key].int()).abs()
            out.append(f"{key}: {int((diff > 0).sum())} pixels differ (max {int(diff.max())})")
    return "; ".join(out) or "no stored crop differs"


@pytest.fixture(scope="module")
def crops() -> dict[str, torch.Tensor]:
    return load_file(str(OUT / "crops.safetensors"))


@pytest.fixture(scope="module")
def transforms() -> tuple[DroidWindowTransform, Any]:
    cfg = Cosmos3DataConfig(action_chunk_length=DOC["frames"] - 1, caption_choice="position")
    reader = DroidWindowTransform(camera_keys=DROID_CAMERAS, joint_action_key=cfg.joint_action_key,
                                  gripper_action_key=cfg.gripper_action_key, joint_state_key=cfg.joint_state_key,
                                  gripper_state_key=cfg.gripper_state_key, fps=15.0, domain_id=8,
                                  caption_choice="position", state_key=cfg.state_key)
    return reader, make_sample_transform(cfg, max_action_dim=64, temporal_compression=4, tokenizer_path=TOKENIZER)


def _rows(cfg_reader: DroidWindowTransform, views: list[torch.Tensor]) -> dict[str, Any]:
    frames = views[0].shape[0]
    rows: dict[str, Any] = dict(zip(DROID_CAMERAS, views, strict=True))
    rows.update({cfg_reader.joint_state_key: torch.zeros(frames, JOINTS), cfg_reader.gripper_state_key:
                 torch.zeros(frames, 1), cfg_reader.joint_action_key: torch.zeros(frames, JOINTS),
                 cfg_reader.gripper_action_key: torch.zeros(frames, 1), "task": "open the drawer",
                 "dataset_index": 0, "episode_index": 0, "start_frame": 0, "task_index": 0})
    return rows


@pytest.mark.parametrize("name", sorted(DOC["cases"]))
def test_canvas_and_bucket_video_equal_the_reference(name: str, transforms: tuple, crops: dict) -> None:
    case = DOC["cases"][name]
    reader, transform = transforms
    height, width = case["camera_hw"]
    cameras = [camera_frames(height, width, camera=i, frames=DOC["frames"]) for i in range(3)]
    assert [_sha(c) for c in cameras] == case["inputs_sha256"], "the generator's frames changed"
    for layout, views in (("channels-last (as decoded)", [c.permute(0, 3, 1, 2) for c in cameras]),
                          ("contiguous", [c.permute(0, 3, 1, 2).contiguous() for c in cameras])):
        raw = reader(_rows(reader, views))
        canvas = raw["video"]
        assert list(canvas.shape) == case["canvas"]["shape"]
        assert _sha(canvas) == case["canvas"]["sha256"], f"{layout} canvas: {_where(canvas, case, 'canvas', crops)}"
        sample = transform(raw)
        video = sample["video"]
        assert list(video.shape) == case["video"]["shape"]
        assert sample["image_size"].tolist() == [*case["video"]["bucket_hw"], *case["video"]["content_hw"]]
        assert _sha(video) == case["video"]["sha256"], f"{layout} video: {_where(video, case, 'video', crops)}"
    # the policy path: one HWC frame per camera gives the training sample's first frame
    observation = {key: c[0].numpy() for key, c in zip(DROID_CAMERAS, cameras, strict=True)}
    observation.update({reader.state_key: [0.0] * (JOINTS + 1), "task": "open the drawer"})
    one = reader.observation(observation)
    assert _sha(one["video"]) == case["canvas"]["frame0_sha256"]
    assert _sha(transform(one)["video"]) == case["video"]["frame0_sha256"]
