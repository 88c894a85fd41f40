"""Entry-point spec of the ``cosmos3_droid`` dataset strategy (group ``embodied.dataset_strategies``; no torch)."""

from __future__ import annotations

from embodied_core.registry import PluginSpec

__all__ = ["COSMOS3_DROID_STRATEGY"]

COSMOS3_DROID_STRATEGY = PluginSpec(
    name="cosmos3_droid",
    description="DROID v3.0 windows of chunk + 1 frames for Cosmos3: 3-view layout, state + commanded joints, "
                "captions with the Qwen3-VL chat template",
    factory="embodied_models.cosmos3.data.strategy:build_strategy",
    checks=("embodied_models.cosmos3.data.strategy:check_run_config",))
