"""``--record-augmentation-draws N``: what the augmentation applied to the first N samples, as JSON lines."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from embodied_core.data.image_augmentation.pipeline import ImageAugmentation

__all__ = ["DRAWS_FILE", "record_draws", "sample_draws"]

DRAWS_FILE = "augmentation_draws.jsonl"


def sample_draws(augmentation: ImageAugmentation, sample: dict[str, Any], *, epoch: int,
                 index: int) -> dict[str, Any]:
    """One line of the draws file: the sample's key and, per camera, the ops applied with their parameters and
    the frame shapes before and after (the same computation the training loader runs for this key)."""
    out, applied = augmentation.augment(sample, epoch=epoch, index=index)
    cameras = {key: {"ops": ops, "shape_in": list(sample[key].shape), "shape_out": list(out[key].shape)}
               for key, ops in applied.items()}
    return {"epoch": epoch, "index": index, "seed": augmentation.sample_key(epoch=epoch, index=index),
            "cameras": cameras}


def record_draws(path: Path, augmentation: ImageAugmentation, samples: Any, keys: Sequence[tuple[int, int]]) -> Path:
    """Writes the draws of the samples ``keys`` (``(epoch, index)``) of ``samples`` to ``path`` (JSON lines, the
    first line the resolved settings); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"settings": augmentation.settings.to_dict(), "seed": augmentation.seed,
                         "seed_by_index": augmentation.seed_by_index})]
    lines += [json.dumps(sample_draws(augmentation, samples[index], epoch=epoch, index=index))
              for epoch, index in keys]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)
    return path
