"""``data.image_augmentation``: which image augmentation a training run applies (no torch here).

Camera frames are augmented between decoding and the model's sample transform, in the loader workers, for training
only. The section names a preset (``lerobot``, ``openpi``, ``groot``, ``cosmos3``, ``dreamzero``: plugins of the
``embodied.image_augmentations`` group) and/or a list of ops; any field left unset takes the preset's value, else
the default below. Ops are plugins of the same group (``color_jitter``, ``random_crop``, ...). In YAML::

    data:
      image_augmentation:
        preset: lerobot
        max_num_ops: 2              # overrides the preset's 3
        exclude_cameras: [wrist]    # these cameras are never augmented

    data:
      image_augmentation:
        ops:
          - {op: random_crop, scale: 0.95}
          - {op: resize}
          - {op: color_jitter, brightness: [0.7, 1.3], skip_cameras: ["*wrist*"]}

Each op entry is ``op`` (its plugin name) plus that op's parameters, and the keys every op takes: ``weight``
(its probability weight when ``max_num_ops`` picks a subset), ``p`` (the probability it applies at all) and
``skip_cameras`` (fnmatch patterns of cameras it leaves alone). The ops are resolved and validated (names, ranges,
cameras) with the rest of the run's configuration, before anything heavy is built
(:mod:`embodied_core.data.augmentation`).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

__all__ = [
    "CAMERA_DRAWS",
    "COMPUTE_DTYPES",
    "DETERMINISTIC_SEEDS",
    "QUANTIZE",
    "SETTINGS",
    "ImageAugmentationConfig",
]

CAMERA_DRAWS = ("independent", "shared")
COMPUTE_DTYPES = ("uint8", "float32")
QUANTIZE = ("round", "truncate")
DETERMINISTIC_SEEDS = ("run", "sample_index")

SETTINGS = ("max_num_ops", "random_order", "camera_draws", "compute_dtype", "quantize", "deterministic_seed")
"""Pipeline settings a preset may set and the section may override (besides ``ops``)."""


@attrs.define(kw_only=True)
class ImageAugmentationConfig:
    """Image augmentation of training samples (off unless ``preset`` or ``ops`` is set)."""

    preset: str | None = None
    """Named augmentation (plugin group embodied.image_augmentations): lerobot, openpi, groot, cosmos3, dreamzero;
    the fields below override its settings. None (and no ops): no augmentation."""
    ops: list[dict[str, Any]] = attrs.field(factory=list)
    """Ops applied in order, each ``{op: NAME, <its parameters>, weight, p, skip_cameras}`` (YAML or
    --config-file only); non-empty, they replace the preset's ops."""
    max_num_ops: int | None = None
    """Apply a random subset of at most this many ops per draw, chosen by their weights without replacement
    (lerobot's max_num_transforms); None: the preset's setting, else every op."""
    random_order: bool | None = None
    """Apply the chosen subset in a random order (lerobot's random_order); None: the preset's, else in list order."""
    camera_draws: Literal["independent", "shared"] | None = None
    """'independent': each camera gets its own draw (lerobot); 'shared': one draw for every camera of a sample
    (an op whose draw depends on the frame size, a crop, needs the cameras at one size there); None: the preset's,
    else independent. Every frame of a camera's video window always shares its camera's draw."""
    exclude_cameras: list[str] = attrs.field(factory=list)
    """Cameras never augmented, by name (``wrist``) or key (``observation.images.wrist``); each must be a camera
    of the dataset."""
    compute_dtype: Literal["uint8", "float32"] | None = None
    """What the ops compute on: 'uint8' frames as decoded (lerobot-train, GR00T), or 'float32' frames / 255
    (DreamZero, LoongForge's cosmos3), converted back to uint8 by ``quantize``; None: the preset's, else uint8."""
    quantize: Literal["round", "truncate"] | None = None
    """float32 -> uint8 after the ops: 'round' to nearest, or 'truncate' (x * 255 cast, as DreamZero and cosmos3 do);
    None: the preset's, else round."""
    deterministic_seed: Literal["run", "sample_index"] | None = None
    """What seeds a sample's draws under --deterministic-mode: 'run' (the usual key of --seed, epoch and sample
    index) or 'sample_index' (``torch.manual_seed(index)``, LoongForge's seeding: the same draw every epoch and
    run); None: the preset's, else run."""

    @property
    def enabled(self) -> bool:
        """Whether the section asks for any augmentation."""
        return self.preset is not None or bool(self.ops)
