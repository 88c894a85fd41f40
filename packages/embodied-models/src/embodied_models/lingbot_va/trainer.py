"""``lingbot_va`` trainer: the FinetuneTrainer plus the model-owned RNG (seeded per rank, checkpointed per rank).

LingBot-VA draws its noise, timesteps, mask sizes and text dropout inside ``forward`` from its own
``torch.Generator`` (never the global RNG), so the draws of a run depend only on ``--seed``, the rank and the
step, and a resumed run continues the same stream.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pluggy
import torch
from torch import nn

from embodied_core.checkpoint.layout import TRAINING_STATE_DIR
from embodied_core.config.run_config import RunConfig
from embodied_core.registry.specs import ModelSpec
from embodied_core.trainer.base import FinetuneTrainer
from embodied_core.trainer.rng import capture_rng_state

__all__ = ["LingBotVATrainer", "build_trainer"]

_RNG_KEY = "model_rng"
_RANK_SEED_STRIDE = 1_000_003  # keeps the streams of ranks apart for any seed


class LingBotVATrainer(FinetuneTrainer):
    """Seeds ``model.seed_rng(seed, rank)`` at build and stores ``model.rng_state()`` in each rank's state."""

    def _inner(self) -> nn.Module:
        return self.strategy.unwrap_model(self.model)

    def build_model(self) -> nn.Module:
        """Builds the model and seeds its generator from ``--seed`` and this rank."""
        model = super().build_model()
        model.seed_rng(self.args.seed + _RANK_SEED_STRIDE * self.strategy.rank)
        return model

    def restore(self, path: Path) -> None:
        """Restores everything the base trainer restores, then the model's generator."""
        super().restore(path)
        rank_file = path / TRAINING_STATE_DIR / f"rank{self.strategy.rank}.pt"
        state = torch.load(rank_file, weights_only=True)
        if _RNG_KEY in state:
            self._inner().set_rng_state(state[_RNG_KEY])

    def save_checkpoint(self) -> Path:
        """Saves the base trainer's checkpoint with the model generator added to the per-rank state."""
        rank_state = {"rng": capture_rng_state(), "dataloader": self.loader.state_dict(),
                      _RNG_KEY: self._inner().rng_state()}
        shared = {"train_state": attrs.asdict(self.state)}
        path = self.checkpointer.save(self.state.step, model=self.model, optimizer=self.optimizer,
                                      scheduler=self.scheduler, rank_state=rank_state, shared_state=shared)
        self.last_checkpoint = path
        self.hooks.hook.on_save_checkpoint(step=self.state.step, path=str(path))
        return path


def build_trainer(config: RunConfig, *, model_spec: ModelSpec, hooks: pluggy.PluginManager) -> LingBotVATrainer:
    """Factory of the ``lingbot_va`` trainer."""
    return LingBotVATrainer(config, model_spec=model_spec, hooks=hooks)
