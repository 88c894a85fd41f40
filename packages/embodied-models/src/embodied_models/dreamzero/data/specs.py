"""Entry-point specs of DreamZero's data plugins (imports no torch)."""

from __future__ import annotations

from embodied_core.registry import PluginSpec

__all__ = ["DREAMZERO_STRATEGY", "PRECOMPUTE_COMMAND"]

DREAMZERO_STRATEGY = PluginSpec(
    name="dreamzero",
    description="DreamZero: GR00T modality.json embodiments (oxe_droid, libero_sim, agibot, yam), LIBERO windows or "
    "DROID language chunks, q01/q99 clamp, view layouts, optional precomputed Wan latents / UMT5 embeddings",
    factory="embodied_models.dreamzero.data.strategy:build_strategy")
PRECOMPUTE_COMMAND = PluginSpec(
    name="data-precompute-dreamzero",
    description="`embodied data precompute-dreamzero`: Wan VAE video / first-frame latents and UMT5 prompt embeddings "
    "per DreamZero sample (resumable, parallel over ranks)",
    factory="embodied_models.dreamzero.data.precompute:main")
