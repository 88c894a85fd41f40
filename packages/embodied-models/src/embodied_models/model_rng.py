"""A FinetuneTrainer for models that draw their training randomness from their own generator (GR00T N1.7's
noise/time/state-dropout draws, LingBot-VA's training streams): the generator is seeded from ``--seed`` when the
model is built and its state travels in every rank's checkpoint, so a resumed run draws what the uninterrupted one
would have. The model provides ``seed_rng``, ``rng_state`` and ``set_rng_state``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

from torch import nn

from embodied_core.trainer.base import FinetuneTrainer

__all__ = ["ModelRngTrainer"]

logger = logging.getLogger("embodied.train")


class ModelRngTrainer(FinetuneTrainer):
    """Seeds the model generator from ``--seed`` and keeps its state in each rank's checkpoint."""

    rng_key: ClassVar[str] = "model_rng"
    """The generator's entry in the per-rank training state (part of the checkpoint format: never rename it)."""
    rng_name: ClassVar[str] = "model generator"
    """What the warning for a checkpoint without the generator calls it."""

    def _inner(self) -> nn.Module:
        return self.strategy.unwrap_model(self.model)

    def seed_model_rng(self, model: nn.Module) -> None:
        """Seeds ``model``'s generator for this rank (default: ``seed_rng(--seed, rank=rank)``)."""
        model.seed_rng(self.args.seed, rank=self.strategy.rank)

    def build_model(self) -> nn.Module:
        """Builds the model and seeds its generator."""
        model = super().build_model()
        self.seed_model_rng(model)
        return model

    def rank_state(self) -> dict[str, Any]:
        """The base trainer's per-rank state plus the model's generator."""
        return {**super().rank_state(), self.rng_key: self._inner().rng_state()}

    def load_rank_state(self, state: dict[str, Any], *, path: Path) -> None:
        """Restores the base trainer's per-rank state, then the model's generator."""
        super().load_rank_state(state, path=path)
        if self.rng_key in state:
            self._inner().set_rng_state(state[self.rng_key])
        else:
            logger.warning("%s holds no %s state; its draws restart from --seed", path, self.rng_name)
