"""Validation spanning Cosmos3's ``model:``, ``data:`` and training sections (no torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from embodied_models.cosmos3.config import Cosmos3ModelConfig

__all__ = ["check_run_config", "token_id_problems"]

START_OF_GENERATION = "<|vision_start|>"


def token_id_problems(model: Cosmos3ModelConfig, tokenizer_dir: str) -> list[str]:
    """``model.eos_token_id`` / ``model.start_of_generation_token_id`` against the tokenizer's eos token and
    ``<|vision_start|>`` (appended as id ``len(tokenizer)`` when the tokenizer lacks it, as LoongForge does).
    An unreadable tokenizer is left to the strategy's own check."""
    folder = Path(tokenizer_dir)
    try:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        eos = json.loads((folder / "tokenizer_config.json").read_text()).get("eos_token")
    except Exception:  # an unreadable tokenizer is reported by the data check, which names the folder
        return []
    if isinstance(eos, dict):
        eos = eos.get("content")
    problems = []
    eos_id = tokenizer.token_to_id(eos) if isinstance(eos, str) else None
    if eos_id is not None and eos_id != model.eos_token_id:
        problems.append(f"model.eos_token_id={model.eos_token_id} but the tokenizer at {folder} has eos {eos!r} = "
                        f"{eos_id}; set model.eos_token_id={eos_id}")
    start = tokenizer.token_to_id(START_OF_GENERATION)
    start = tokenizer.get_vocab_size(with_added_tokens=True) if start is None else start
    if start != model.start_of_generation_token_id:
        problems.append(f"model.start_of_generation_token_id={model.start_of_generation_token_id} but "
                        f"{START_OF_GENERATION} is {start} for the tokenizer at {folder}; set "
                        f"model.start_of_generation_token_id={start}")
    for name, value in (("eos_token_id", eos_id), ("start_of_generation_token_id", start)):
        if value is not None and value >= model.vocab_size:
            problems.append(f"the tokenizer at {folder} gives {name} {value}, beyond model.vocab_size "
                            f"{model.vocab_size}")
    return problems


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
    tokenizer = getattr(data, "tokenizer_path", None) or training.tokenizer_path
    if tokenizer:
        problems += token_id_problems(model, tokenizer)
    if training.dataset_format == "lerobot_datasets" and training.dataset_strategy != "cosmos3_droid":
        problems.append(f"{training.model_name} trains on Cosmos3 policy samples (3-view video windows, state + "
                        "commanded actions, chat-templated captions): add --dataset-strategy cosmos3_droid")
    return problems
