"""Validation spanning Cosmos3's ``model:``, ``data:`` and training sections (no torch)."""

from __future__ import annotations

from typing import Any

from embodied_models.cosmos3.config import Cosmos3ModelConfig

__all__ = ["check_run_config"]


def check_run_config(config: Any) -> list[str]:
    """Extra validation of a RunConfig whose model is Cosmos3 (declared in the cosmos3 specs' ``checks``)."""
    model, data, training = config.model, config.data, config.training
    if not isinstance(model, Cosmos3ModelConfig):
        return []
    problems = []
    if data.action_dim is not None and data.action_dim > model.max_action_dim:
        problems.append(f"data.action_dim {data.action_dim} exceeds model.max_action_dim {model.max_action_dim}")
    chunk = getattr(data, "action_chunk_length", None)
    if chunk is not None and chunk % model.vae_temporal_compression:
        problems.append(f"data.action_chunk_length={chunk} must be a multiple of the VAE's temporal compression "
                        f"{model.vae_temporal_compression}")
    if chunk is not None and data.action_horizon != chunk:
        problems.append(f"data.action_horizon={data.action_horizon} must equal data.action_chunk_length={chunk}: "
                        "the policy returns the chunk's command rows")
    if training.dataset_format == "lerobot_datasets" and training.dataset_strategy != "cosmos3_droid":
        problems.append(f"{training.model_name} trains on Cosmos3 policy samples (3-view video windows, state + "
                        "commanded actions, chat-templated captions): add --dataset-strategy cosmos3_droid")
    return problems
