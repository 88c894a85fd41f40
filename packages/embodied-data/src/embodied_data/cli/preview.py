"""``embodied data preview DATASET --image-augmentation PRESET``: a PNG grid of original vs augmented frames.

One row per sample (evenly spaced over the dataset), two columns per camera: the frame as decoded and as the
training loader would hand it on in epoch ``--epoch`` of a run with ``--seed`` (the same pipeline and per-sample
draws as training). A camera's video window shows its last frame. The ops applied to each sample are printed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from embodied_core.errors import UsageError

__all__ = ["augmentation_section", "preview"]

_GAP = 4


def augmentation_section(value: str) -> Any:
    """``--image-augmentation``: a preset name, or a YAML file holding a ``data.image_augmentation`` mapping (a run
    config with a ``data:`` section, or the mapping itself)."""
    from embodied_core.config.converter import structure
    from embodied_core.config.image_augmentation import ImageAugmentationConfig

    path = Path(value)
    if not value.endswith((".yaml", ".yml")):
        return ImageAugmentationConfig(preset=value)
    if not path.is_file():
        raise UsageError(f"--image-augmentation {value}: no such file (give a preset name or a YAML file)")
    doc = yaml.safe_load(path.read_text()) or {}
    if isinstance(doc, dict) and isinstance(doc.get("data"), dict):
        doc = doc["data"].get("image_augmentation", {})
    return structure(doc, ImageAugmentationConfig, path="data.image_augmentation", source=str(path))


def _indices(total: int, count: int) -> list[int]:
    if total == 0:
        raise UsageError("the dataset has no samples to preview")
    count = min(count, total)
    return sorted({round(i * (total - 1) / max(1, count - 1)) for i in range(count)})


def _hwc(frames: Any) -> Any:
    """The frame shown for a camera value: ``[H, W, 3]`` uint8 (the last frame of a window)."""
    frame = frames[-1] if frames.ndim == 4 else frames
    return frame.permute(1, 2, 0).contiguous().numpy()


def _grid(rows: list[list[Any]]) -> Any:
    import numpy as np

    widths = [max(row[c].shape[1] for row in rows) for c in range(len(rows[0]))]
    heights = [max(cell.shape[0] for cell in row) for row in rows]
    canvas = np.full((sum(heights) + _GAP * (len(rows) + 1), sum(widths) + _GAP * (len(widths) + 1), 3), 255,
                     dtype=np.uint8)
    top = _GAP
    for row, height in zip(rows, heights, strict=True):
        left = _GAP
        for cell, width in zip(row, widths, strict=True):
            canvas[top:top + cell.shape[0], left:left + cell.shape[1]] = cell
            left += width + _GAP
        top += height + _GAP
    return canvas


def preview(path: str, *, section: Any, samples: int, out: Path, seed: int, epoch: int,
            cameras: Sequence[str] | None, episodes: Sequence[int] | None = None,
            video_backend: str = "torchcodec") -> list[str]:
    """Writes the grid to ``out``; returns one line per sample naming the ops applied per camera.

    Raises:
        ConfigError: bad augmentation settings (exit 2, naming the field); UsageError: an unknown camera.
    """
    from PIL import Image

    from embodied_core.data.image_augmentation import build_ops, camera_name, resolve_augmentation
    from embodied_core.data.image_augmentation.pipeline import ImageAugmentation
    from embodied_data.lerobot.dataset import LeRobotDataset
    from embodied_data.lerobot.metadata import LeRobotMeta

    meta = LeRobotMeta.load(path)
    visual = [key for key, feature in meta.features.items() if feature.is_video or feature.is_image]
    chosen = list(visual) if not cameras else [_camera(c, visual) for c in cameras]
    settings = resolve_augmentation(section, cameras=visual)
    if settings is None:
        raise UsageError("--image-augmentation names no augmentation (a preset, or a YAML file with ops)")
    augmentation = ImageAugmentation(settings, build_ops(settings), seed=seed, camera_keys=chosen)
    dataset = LeRobotDataset(path, meta=meta, camera_keys=chosen, episodes=episodes, video_backend=video_backend)
    rows, lines = [], []
    for index in _indices(len(dataset), samples):
        raw = dataset[index]
        augmented, applied = augmentation.augment(raw, epoch=epoch, index=index)
        rows.append([image for key in chosen for image in (_hwc(raw[key]), _hwc(augmented[key]))])
        ops = "; ".join(f"{camera_name(key)}: {', '.join(_describe(op) for op in applied.get(key, [])) or 'none'}"
                        for key in chosen)
        lines.append(f"sample {index}: {ops}")
    out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(_grid(rows)).save(out)
    return lines


_QUIET = {"needs_crop", "needs_pad", "padding", "fn_idx", "height", "width"}


def _describe(op: dict[str, Any]) -> str:
    """``color_jitter(brightness_factor=0.931)``: an applied op with the parameters worth reading."""
    shown = []
    for key, value in op["params"].items():
        if key in _QUIET or value is None:
            continue
        shown.append(f"{key}={value:.3g}" if isinstance(value, float) else f"{key}={value}")
    return f"{op['op']}({', '.join(shown)})"


def _camera(name: str, visual: Sequence[str]) -> str:
    from embodied_core.data.image_augmentation import camera_name
    from embodied_core.errors import did_you_mean

    for key in visual:
        if name in (key, camera_name(key)):
            return key
    names = [camera_name(k) for k in visual]
    raise UsageError(f"--cameras {name}: not a camera of the dataset (cameras: {', '.join(names)})"
                     f"{did_you_mean(name, names)}")
