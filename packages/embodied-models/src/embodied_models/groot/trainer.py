"""What the GR00T trainers share: naming ``groot_n1_7``-strategy cameras by their meta/modality.json video keys.

With ``--dataset-strategy groot_n1_7`` the strategy renames cameras to ``video.<name>`` (meta/modality.json). The
trainers write ``data.camera_keys`` in that form before anything is built, so samples, the policy interface (image
shapes) and inference observations all use the modality names. The ports' trainers (``groot_n1_6``, ``groot_n1_7``)
are :class:`~embodied_models.model_rng.ModelRngTrainer` s that seed and checkpoint the model's draw generator.
"""

from __future__ import annotations

import logging
import os

import attrs

from embodied_core.config.run_config import RunConfig

__all__ = ["STRATEGY", "modality_camera_keys", "with_modality_cameras"]

logger = logging.getLogger("embodied.train")

STRATEGY = "groot_n1_7"
"""The dataset strategy that reads GR00T's meta/modality.json (embodied-data)."""


def modality_camera_keys(config: RunConfig) -> list[str] | None:
    """``data.camera_keys`` as ``video.<name>`` of the dataset's meta/modality.json (None: nothing to rename)."""
    args, data = config.training, config.data
    if args.dataset_format != "lerobot_datasets" or args.dataset_strategy != STRATEGY or not args.dataset_path:
        return None
    if data.camera_keys is None:
        return None
    from embodied_data.lerobot.metadata import LeRobotMeta
    from embodied_data.strategies.groot import load_modality

    layout = load_modality(LeRobotMeta.load(args.dataset_path, expected_version=args.lerobotdataset_version))
    by_camera = {camera: name for name, camera in layout.video.items()}
    renamed = []
    for key in data.camera_keys:
        short = key.removeprefix("video.")
        name = short if short in layout.video else by_camera.get(key)
        renamed.append(f"video.{name}" if name is not None else key)
    return renamed if renamed != list(data.camera_keys) else None


def with_modality_cameras(config: RunConfig) -> RunConfig:
    """``config`` with :func:`modality_camera_keys` applied (logged on rank 0), or ``config`` itself."""
    renamed = modality_camera_keys(config)
    if renamed is None:
        return config
    if os.environ.get("RANK", "0") == "0":
        logger.info("data.camera_keys %s -> %s (meta/modality.json video names)", config.data.camera_keys, renamed)
    return attrs.evolve(config, data=attrs.evolve(config.data, camera_keys=renamed))
