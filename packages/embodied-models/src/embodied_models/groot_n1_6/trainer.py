"""``groot_n1_6`` trainer: the FinetuneTrainer plus GR00T N1.6's draw generator and modality camera names.

- The model draws its flow noise and time from its own generator (``embodied_models.groot.draws``, keyed per
  sample). The trainer seeds it from ``--seed`` (the same on every rank) and keeps its state in each rank's
  checkpoint, so a resumed run continues the same stream.
- With ``--dataset-strategy groot_n1_7`` (GR00T's meta/modality.json) the cameras are named by their modality video
  keys (``embodied_models.groot.trainer``, shared with groot_n1_7).
"""

from __future__ import annotations

import pluggy

from embodied_core.config.run_config import RunConfig
from embodied_core.registry.specs import ModelSpec
from embodied_models.groot.trainer import with_modality_cameras
from embodied_models.model_rng import ModelRngTrainer

__all__ = ["GrootN16Trainer", "build_trainer"]


class GrootN16Trainer(ModelRngTrainer):
    """Seeds the model generator from ``--seed`` and keeps its state in each rank's checkpoint."""

    rng_key = "groot_draws"
    rng_name = "GR00T N1.6 generator"


def build_trainer(config: RunConfig, *, model_spec: ModelSpec, hooks: pluggy.PluginManager) -> GrootN16Trainer:
    """Factory of the ``groot_n1_6`` trainer (names groot_n1_7-strategy cameras by their modality keys)."""
    return GrootN16Trainer(with_modality_cameras(config), model_spec=model_spec, hooks=hooks)
