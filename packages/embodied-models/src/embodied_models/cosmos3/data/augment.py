"""``data.use_image_augmentation``: LoongForge cosmos3's augmentation of the three views, where LoongForge runs it.

LoongForge's ``DROIDLeRobotDataset`` stacks the decoded wrist, left and right frames (``[3T, 3, H, W]`` floats in
[0, 1]) and runs ``build_image_augmentor`` (RandomCrop 95 %, Resize back, ColorJitter) on the stack before laying
the views out; the layout's bilinear halving then works on the augmented floats. The ops are embodied-data's
``cosmos3`` preset (torchvision's transforms, v1 kernels as LoongForge's default), drawn once for the whole stack
from torch's RNG: as the loader seeded it for the sample, or reseeded with the sample's position (LoongForge's
--deterministic-mode, ``torch.manual_seed(idx)`` inside ``fork_rng``). The crop and resize run on one intra-op
thread, like the layout (:func:`~embodied_models.cosmos3.data.video.one_thread`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from embodied_models.cosmos3.data.video import one_thread

__all__ = ["ViewAugmentation"]


class ViewAugmentation:
    """``augmentation(views, position) -> views``: uint8 ``[T, 3, H, W]`` views -> augmented float views. Picklable.

    Args:
        by_position: reseed torch's RNG with the sample's position (else draw from it as the loader seeded it).
    """

    def __init__(self, *, by_position: bool) -> None:
        from embodied_core.config.image_augmentation import ImageAugmentationConfig
        from embodied_core.data.image_augmentation import build_ops, resolve_augmentation
        from embodied_core.data.image_augmentation.pipeline import ImageAugmentation

        settings = resolve_augmentation(ImageAugmentationConfig(preset="cosmos3"))
        assert settings is not None
        self.pipeline = ImageAugmentation(settings, build_ops(settings), seed=0)
        self.by_position = by_position

    def __call__(self, views: Sequence[torch.Tensor], position: int) -> list[torch.Tensor]:
        from embodied_models.cosmos3.data.reader import as_floats

        counts = [int(v.shape[0]) for v in views]
        stack = torch.cat([as_floats(v) for v in views], dim=0)
        with one_thread():
            if self.by_position:
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(int(position))
                    out = self._augment(stack)
            else:
                out = self._augment(stack)
        return list(torch.split(out, counts, dim=0))

    def _augment(self, stack: torch.Tensor) -> Any:
        return self.pipeline.transform(stack)[0]
