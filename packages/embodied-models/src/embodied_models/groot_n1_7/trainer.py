"""``groot_n1_7`` trainer: the FinetuneTrainer plus GR00T N1.7's draw generator and modality camera names.

- The model draws its flow noise, time and state dropout from its own generator (draws.py). The trainer seeds it
  from ``--seed`` (the same on every rank: the draws are keyed per sample) and keeps its state in each rank's
  checkpoint, so a resumed run continues the same stream.
- With ``--dataset-strategy groot_n1_7`` the strategy renames cameras to ``video.<name>`` (meta/modality.json).
  The trainer writes ``data.camera_keys`` in that form before anything is built, so samples, the policy interface
  (image shapes) and inference observations all use the modality names.
"""

from __future__ import annotations

import logging
import os

import attrs
import pluggy

from embodied_core.config.run_config import RunConfig
from embodied_core.registry.specs import ModelSpec
from embodied_models.model_rng import ModelRngTrainer

__all__ = ["GrootTrainer", "build_trainer", "modality_camera_keys"]

logger = logging.getLogger("embodied.train")

STRATEGY = "groot_n1_7"


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


class GrootTrainer(ModelRngTrainer):
    """Seeds the model generator from ``--seed`` and keeps its state in each rank's checkpoint."""

    rng_key = "groot_draws"
    rng_name = "GR00T N1.7 generator"


def build_trainer(config: RunConfig, *, model_spec: ModelSpec, hooks: pluggy.PluginManager) -> GrootTrainer:
    """Factory of the ``groot_n1_7`` trainer (names groot_n1_7-strategy cameras by their modality keys)."""
    renamed = modality_camera_keys(config)
    if renamed is not None:
        if os.environ.get("RANK", "0") == "0":
            logger.info("data.camera_keys %s -> %s (meta/modality.json video names)", config.data.camera_keys, renamed)
        config = attrs.evolve(config, data=attrs.evolve(config.data, camera_keys=renamed))
    return GrootTrainer(config, model_spec=model_spec, hooks=hooks)
