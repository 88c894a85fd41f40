"""``dreamzero`` trainer: the FinetuneTrainer whose ``--use-lora`` also trains the state/action encoders and the
action decoder in full when ``--lora-modules-to-save`` is not given (LoongForge's ``default_lora_targets``
declares them as ``modules_to_save``; core's protocol has no such member), and which applies
``model.fsdp_initial_param_rounding_dtype`` (LoongForge's one-time rounding of the trainable parameters before the
first step of a fresh run)."""

from __future__ import annotations

import logging

import attrs
import pluggy
import torch
from torch import nn

from embodied_core.config.run_config import RunConfig
from embodied_core.registry.specs import ModelSpec
from embodied_core.trainer.base import FinetuneTrainer
from embodied_models.dreamzero.modeling import LORA_MODULES_TO_SAVE

__all__ = ["DreamZeroTrainer", "build_trainer", "round_trainable_"]

logger = logging.getLogger("embodied.train")

_ROUNDING_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def round_trainable_(optimizer: torch.optim.Optimizer, dtype: str) -> int:
    """Rounds every trainable floating parameter the optimizer holds through ``dtype`` ('bf16' / 'fp16') in place,
    keeping its storage dtype (LoongForge's ``fsdp_initial_param_rounding_dtype``); returns the elements rounded.
    Sharded (DTensor) parameters round their local shard, which is the same elementwise operation."""
    target = _ROUNDING_DTYPES[dtype]
    count = 0
    with torch.no_grad():
        for group in optimizer.param_groups:
            for param in group["params"]:
                if param.requires_grad and torch.is_floating_point(param):
                    param.data.copy_(param.data.to(target).to(param.dtype))
                    count += param.numel()
    return count


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

    def setup(self) -> None:
        """The base setup; then, on a fresh run, the reference's one-time parameter rounding (when configured)."""
        super().setup()
        dtype = self.config.model.fsdp_initial_param_rounding_dtype
        if dtype is not None and self.state.step == 0:
            count = round_trainable_(self.optimizer, dtype)
            logger.info("dreamzero: %d trainable parameter elements rounded through %s before step 1", count, dtype)


def build_trainer(config: RunConfig, *, model_spec: ModelSpec, hooks: pluggy.PluginManager) -> DreamZeroTrainer:
    """Factory of the ``dreamzero`` trainer plugin."""
    return DreamZeroTrainer(config, model_spec=model_spec, hooks=hooks)
