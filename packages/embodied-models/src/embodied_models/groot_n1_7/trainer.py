"""``groot_n1_7`` trainer: the FinetuneTrainer plus GR00T N1.7's draw generator and modality camera names.

- The model draws its flow noise, time and state dropout from its own generator (``embodied_models.groot.draws``).
  The trainer seeds it from ``--seed`` (the same on every rank: the draws are keyed per sample) and keeps its state
  in each rank's checkpoint, so a resumed run continues the same stream.
- With ``--dataset-strategy groot_n1_7`` the cameras are named by their meta/modality.json video keys
  (``embodied_models.groot.trainer``, shared with groot_n1_6).
"""

from __future__ import annotations

import pluggy

from embodied_core.config.run_config import RunConfig
from embodied_core.registry.specs import ModelSpec
from embodied_models.groot.trainer import STRATEGY, modality_camera_keys, with_modality_cameras
from embodied_models.model_rng import ModelRngTrainer

__all__ = ["STRATEGY", "GrootTrainer", "build_trainer", "modality_camera_keys"]


class GrootTrainer(ModelRngTrainer):
    """Seeds the model generator from ``--seed`` and keeps its state in each rank's checkpoint."""

    rng_key = "groot_draws"
    rng_name = "GR00T N1.7 generator"


def build_trainer(config: RunConfig, *, model_spec: ModelSpec, hooks: pluggy.PluginManager) -> GrootTrainer:
    """Factory of the ``groot_n1_7`` trainer (names groot_n1_7-strategy cameras by their modality keys)."""
    return GrootTrainer(with_modality_cameras(config), model_spec=model_spec, hooks=hooks)
