"""Entry-point specs of the FastWAM data side (light: no torch)."""

from __future__ import annotations

from embodied_core.registry.specs import PluginSpec

__all__ = ["FASTWAM_STRATEGY", "PRECOMPUTE_TEXT_COMMAND"]

FASTWAM_STRATEGY = PluginSpec(name="fastwam",
                              description="FastWAM (LoongForge): video window every action_video_freq_ratio frames, "
                              "action chunk, current state, UMT5 prompt embeddings from a text cache",
                              factory="embodied_models.fastwam.data.strategy:build_strategy",
                              checks=("embodied_models.fastwam.data.config:check_strategy_model",))

PRECOMPUTE_TEXT_COMMAND = PluginSpec(name="data-precompute-text",
                                     description="`embodied data precompute-text`: UMT5 embeddings of a LeRobot "
                                     "dataset's FastWAM prompts (text cache)",
                                     factory="embodied_models.fastwam.data.precompute_text:main")
