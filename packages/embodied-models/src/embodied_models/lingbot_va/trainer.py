"""``lingbot_va`` trainer: the FinetuneTrainer plus the model-owned RNG (seeded per rank, checkpointed per rank).

LingBot-VA draws its noise, timesteps, mask sizes and text dropout inside ``forward`` from its own
``torch.Generator`` (never the global RNG), so the draws of a run depend only on ``--seed``, the rank and the
step, and a resumed run continues the same stream. With ``model.export_transformer=true`` every checkpoint also
gets a diffusers ``transformer/`` folder that ``LingBotVATransformer.from_pretrained`` loads.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pluggy
from torch import nn

from embodied_core.config.run_config import RunConfig
from embodied_core.registry.specs import ModelSpec
from embodied_models.model_rng import ModelRngTrainer

__all__ = ["LingBotVATrainer", "build_trainer"]

logger = logging.getLogger("embodied.train")

_RANK_SEED_STRIDE = 1_000_003  # keeps the streams of ranks apart for any seed


class LingBotVATrainer(ModelRngTrainer):
    """Seeds the model generator from ``--seed`` and the rank, and keeps its state in each rank's checkpoint."""

    rng_key = "model_rng"
    rng_name = "LingBot-VA generator"

    def seed_model_rng(self, model: nn.Module) -> None:
        """Seeds the generator from ``--seed`` and this rank (one stream per rank)."""
        model.seed_rng(self.args.seed + _RANK_SEED_STRIDE * self.strategy.rank)

    def restore(self, path: Path) -> None:
        """Restores everything; with ``model.resume_optimizer=rebuild`` the optimizer moments start fresh."""
        super().restore(path)
        if getattr(self.config.model, "resume_optimizer", "restore") == "rebuild":
            # Fresh moments and step counts, as a newly built optimizer; the LR comes from the restored schedule.
            self.optimizer.state.clear()
            logger.info("model.resume_optimizer=rebuild: optimizer state reset; weights, step and LR schedule "
                        "continue from %s", path)

    def log_step(self, record: Any) -> dict[str, float] | None:
        """The base metrics, plus one ``STEP_TIMING`` line per timed step on rank 0 (recipes grep these)."""
        out = super().log_step(record)
        if out and self.strategy.is_main and any(key.startswith("time/") for key in out):
            stages = " ".join(f"{key[5:-2]}={value:.4f}s" for key, value in out.items()
                              if key.startswith("time/") and "/rank" not in key)
            print(f"STEP_TIMING step={self.state.step} {stages} total={out.get('step_time_s', float('nan')):.4f}s",
                  flush=True)
        return out

    def save_checkpoint(self) -> Path:
        """Saves the base trainer's checkpoint, plus a diffusers ``transformer/`` folder when asked."""
        path = super().save_checkpoint()
        if getattr(self.config.model, "export_transformer", False) and self.strategy.is_main:
            self.export_transformer(path)
        return path

    def export_transformer(self, path: Path) -> None:
        """Writes ``<checkpoint>/transformer/`` (diffusers layout) from the checkpoint's ``model.safetensors``."""
        from safetensors.torch import load_file

        from embodied_models.lingbot_va.checkpoint import map_keys, save_transformer_folder

        weights = path / "model.safetensors"
        if not weights.is_file():
            logger.warning("model.export_transformer: %s has no model.safetensors (save format %s); convert it "
                           "with `embodied checkpoint convert` first", path, self.args.save_format)
            return
        state = map_keys(load_file(str(weights)), "embodied")
        save_transformer_folder(state, self._inner().transformer.config, path)


def build_trainer(config: RunConfig, *, model_spec: ModelSpec, hooks: pluggy.PluginManager) -> LingBotVATrainer:
    """Factory of the ``lingbot_va`` trainer."""
    return LingBotVATrainer(config, model_spec=model_spec, hooks=hooks)
