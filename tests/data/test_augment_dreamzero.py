"""DreamZero's training frames equal LoongForge's torchvision v2 pipeline bit for bit (issue 26, instance 3).

LoongForge runs DreamZero's crop / resize / jitter as ``VideoCrop`` (v2 ``RandomCrop``), ``VideoResize`` (v2
``Resize``, bilinear, antialias) and ``VideoColorJitter`` (v2 ``ColorJitter(0.3, 0.4, 0.5, 0.08)``) on the views
concatenated along time, as floats in [0, 1], then ``VideoToNumpy`` truncates x 255 to uint8. The reference below
is that composition of torchvision's own transforms under ``torch.manual_seed(seed)``; ``process_views`` draws from
a generator seeded the same way. Before the jitter moved to torchvision's functions (its own HSV code), some pixels
were one level off in every case below (1 to 5 values per case; measured with the previous ``video.py``).
"""

from __future__ import annotations

import pytest
import torch

from benchmarks.augment_frames import camera_frames
from embodied_models.dreamzero.data.video import ColorJitter, process_views

CASES = [  # (H, W) of the two views, (h, w) after the resize, seeds (each one the old HSV code got wrong)
    ((180, 320), (176, 320), (0,)),  # DROID's cameras at DreamZero's default frame size
    ((240, 352), (176, 320), (0,)),
    ((97, 130), (64, 96), (4, 5)),  # odd sizes, down-scaled
    ((61, 83), (61, 83), (4, 5)),  # odd, the crop scaled back up
]


def loongforge_frames(views: list[torch.Tensor], size: tuple[int, int], seed: int) -> torch.Tensor:
    """``[sum T, h, w, 3]`` uint8: LoongForge's DreamZero train transform of the concatenated views."""
    from torchvision.transforms import v2

    x = torch.cat([v.to(torch.float32) / 255.0 for v in views], dim=0)
    height, width = x.shape[-2:]
    pipeline = v2.Compose([v2.RandomCrop((int(height * 0.95), int(width * 0.95))),
                           v2.Resize(size, antialias=True),
                           v2.ColorJitter(brightness=0.3, contrast=0.4, saturation=0.5, hue=0.08)])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = pipeline(x)
    return (out.permute(0, 2, 3, 1) * 255).to(torch.uint8)


@pytest.mark.parametrize(("shape", "size", "seeds"), CASES, ids=[f"{h}x{w}" for (h, w), _, _ in CASES])
def test_training_frames_equal_torchvision_v2(shape: tuple[int, int], size: tuple[int, int],
                                              seeds: tuple[int, ...]) -> None:
    views = [camera_frames(*shape, camera=c, frames=2) for c in range(2)]
    for seed in seeds:
        ours, _ = process_views(views, size=size, crop_scale=0.95, training=True, jitter=ColorJitter(),
                                generator=torch.Generator().manual_seed(seed))
        expected = loongforge_frames(views, size, seed)
        got = torch.cat(ours, dim=0)
        differ = int((got != expected).sum())
        assert differ == 0, f"seed {seed}: {differ} values differ (max {int((got.int() - expected.int()).abs().max())})"
