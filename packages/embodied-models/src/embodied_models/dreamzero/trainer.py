"""``dreamzero`` trainer: the FinetuneTrainer whose ``--use-lora`` also trains the state/action encoders and the
action decoder in full when ``--lora-modules-to-save`` is not given (LoongForge's ``default_lora_targets``
declares them as ``modules_to_save``; core's protocol has no such member)."""

from __future__ import annotations

import logging

import attrs
import pluggy
from torch import nn

from embodied_core.config.run_config import RunConfig
from embodied_core.registry.specs import ModelSpec
from embodied_core.trainer.base import FinetuneTrainer
from embodied_models.dreamzero.modeling import LORA_MODULES_TO_SAVE

__all__ = ["DreamZeroTrainer", "build_trainer"]

logger = logging.getLogger("embodied.train")


class DreamZeroTrainer(FinetuneTrainer):
    """Fills ``--lora-modules-to-save`` with DreamZero's encoders / decoder under ``--use-lora`` when unset."""

    def apply_lora(self, model: nn.Module) -> None:
        """See the module docstring; then the base trainer's LoRA setup."""
        if self.args.lora_modules_to_save is None:
            names = ",".join(LORA_MODULES_TO_SAVE)
            logger.info("dreamzero: --lora-modules-to-save %s (trained in full, as the reference)", names)
            self.args = attrs.evolve(self.args, lora_modules_to_save=names)
            self.config = attrs.evolve(self.config, training=self.args)
        super().apply_lora(model)


def build_trainer(config: RunConfig, *, model_spec: ModelSpec, hooks: pluggy.PluginManager) -> DreamZeroTrainer:
    """Factory of the ``dreamzero`` trainer plugin."""
    return DreamZeroTrainer(config, model_spec=model_spec, hooks=hooks)
