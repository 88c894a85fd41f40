"""The ``lerobot`` augmentation preset against lerobot 0.6.1's own ImageTransforms, bit for bit given the same draws.

Golden: ``tests/fixtures/augment_lerobot/`` from ``benchmarks/augment_lerobot_golden.py`` (lerobot's code in the
side venv): frames of 48 x 64, 240 x 352 and odd sizes, 1 to 3 cameras, single frames and video windows, several
seeds (each picks another subset of the six transforms).
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from benchmarks.augment_frames import camera_frames, sha256
from embodied_core.config.image_augmentation import ImageAugmentationConfig
from embodied_core.data.image_augmentation import build_ops, resolve_augmentation
from embodied_core.data.image_augmentation.pipeline import ImageAugmentation
from tests.support import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "augment_lerobot"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())
RUNS_PER_CASE = 3  # of the golden's 1-6 seeds per case: 15 draws in all, every transform picked several times


@pytest.fixture(scope="module")
def lerobot_preset() -> ImageAugmentation:
    settings = resolve_augmentation(ImageAugmentationConfig(preset="lerobot"))
    assert settings is not None
    # seed_by_index: a sample's draws come from torch.manual_seed(index), the golden's torch.manual_seed(seed)
    return ImageAugmentation(settings, build_ops(settings), seed=0, seed_by_index=True)


def test_preset_settings_are_lerobots_defaults(lerobot_preset: ImageAugmentation) -> None:
    config = EXPECTED["config"]
    assert lerobot_preset.settings.max_num_ops == config["max_num_transforms"] == 3
    assert lerobot_preset.settings.random_order is config["random_order"] is False
    ours = [(e.name, e.weight) for e in lerobot_preset.entries]
    assert [w for _, w in ours] == [t["weight"] for t in config["tfs"].values()]
    assert [n for n, _ in ours] == ["color_jitter"] * 4 + ["sharpness_jitter", "random_affine"]


@pytest.mark.parametrize("case", sorted(EXPECTED["cases"]))
def test_frames_equal_lerobots(lerobot_preset: ImageAugmentation, case: str) -> None:
    spec = EXPECTED["cases"][case]
    height, width = spec["size"]
    keys = [f"observation.images.cam{c}" for c in range(spec["cameras"])]
    inputs = {key: camera_frames(height, width, camera=c, frames=spec["frames"]) for c, key in enumerate(keys)}
    small = load_file(str(FIXTURE / "small.safetensors")) if height == 48 else {}
    for run in spec["runs"][:RUNS_PER_CASE]:
        sample = {**inputs, "task": "t"}
        out, applied = lerobot_preset.augment(sample, epoch=0, index=run["seed"])
        for c, (key, cam) in enumerate(zip(keys, run["cameras"], strict=True)):
            assert sha256(inputs[key]) == cam["input"], "the synthetic frames changed: regenerate the golden"
            names = [op["op"] for op in applied[key]]
            assert len(names) == len(cam["transforms"]) == 3
            stored = small.get(f"{case}/{run['seed']}/{c}")
            if stored is not None:
                assert torch.equal(out[key], stored), f"seed {run['seed']} {key}: {cam['transforms']}"
            assert sha256(out[key]) == cam["output"], f"seed {run['seed']} {key}: lerobot applied {cam['transforms']}"
        assert out["task"] == "t"


@pytest.mark.parametrize("shape", [(3, 240, 352), (2, 3, 97, 130), (3, 61, 83), (4, 2, 3, 48, 64)])
def test_sharpness_on_channels_last_frames_equals_torchvisions_call(shape: tuple[int, ...]) -> None:
    """The sharpness op runs torchvision's adjust_sharpness on a channels-last copy (the fast depthwise kernel):
    the same pixels as torchvision's call on the frames as they are, for single frames, windows and odd sizes."""
    from torchvision.transforms.v2 import functional as F

    from embodied_data.augment.ops import SharpnessJitterOp
    from embodied_data.augment.params import SharpnessJitterParams

    op = SharpnessJitterOp(SharpnessJitterParams(sharpness=(0.0, 2.0)))
    generator = torch.Generator().manual_seed(sum(shape))
    frames = torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator)
    decoded_layout = frames.movedim(-3, -1).contiguous().movedim(-1, -3)  # an HWC buffer seen as CHW, as decoded
    for factor in (0.0, 0.5, 0.731, 1.0, 1.37, 2.0):
        expected = F.adjust_sharpness(frames, sharpness_factor=factor)
        for layout in (frames, decoded_layout):
            out = op.apply(layout, {"sharpness_factor": factor})
            assert out.is_contiguous() and out.shape == frames.shape
            assert torch.equal(out, expected), factor


def _decoded_frames() -> torch.Tensor:
    """Three 480 x 640 frames of a shared dataset's MPEG-4 video, decoded by torchcodec (real colour statistics)."""
    from torchcodec.decoders import VideoDecoder

    from tests.support import DATASETS_DIR

    video = sorted((DATASETS_DIR / "lingzu_pi05_v30" / "videos").rglob("*.mp4"))[0]
    return VideoDecoder(str(video)).get_frames_at([0, 40, 80]).data


@pytest.mark.parametrize("kernels", ["v2", "v1"])
def test_hue_per_colour_equals_torchvisions_call(kernels: str) -> None:
    """Hue runs once per distinct colour and is gathered back: the same pixels as the kernel's call on the frames,
    on decoded video frames (one and a window), random frames of odd sizes, and hue factors over the whole range."""
    from embodied_data.augment._torchvision import transforms_v1, transforms_v2
    from embodied_data.augment.color import hue_per_colour

    adjust_hue = (transforms_v2() if kernels == "v2" else transforms_v1()).functional.adjust_hue
    generator = torch.Generator().manual_seed(5)
    decoded = _decoded_frames()
    factors = (-0.5, -0.05, -0.0123, 0.0, 0.031, 0.05, 0.5)
    cases = [(decoded[1], factors[1::3]), (decoded, factors[::3] if kernels == "v2" else ()),
             (torch.randint(0, 256, (2, 3, 97, 130), dtype=torch.uint8, generator=generator), factors),
             (torch.randint(0, 256, (3, 61, 83), dtype=torch.uint8, generator=generator)[:, ::2], factors)]
    for frames, case_factors in cases:  # the odd frame is not contiguous
        for factor in case_factors:
            out = hue_per_colour(adjust_hue, frames, factor)
            assert out.shape == frames.shape and out.dtype == torch.uint8
            assert torch.equal(out, adjust_hue(frames, factor)), (tuple(frames.shape), factor)
