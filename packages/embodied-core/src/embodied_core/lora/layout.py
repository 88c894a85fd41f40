"""File names of LoRA checkpoints (light: no torch, no peft).

A LoRA checkpoint directory (``checkpoints/step_<N>/``) holds, next to the policy files and ``training_state/``::

    adapter_model.safetensors   the adapters in PEFT's format (keys "base_model.model.<layer>.lora_A.weight", ...)
    adapter_config.json         PEFT's LoraConfig (PeftModel.from_pretrained and load_policy read it)
    lora_base.json              the reference to the base weights, and the LoRA settings a resume must repeat
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ADAPTER_CONFIG", "ADAPTER_WEIGHTS", "BASE_FILE", "INITIAL_BASE", "LORA_FORMAT_NAME", "is_adapter_folder"]

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
BASE_FILE = "lora_base.json"
"""``{"base": <reference to the base weights>, "training": <LoRA settings of the run>}``."""
INITIAL_BASE = Path("lora_base") / "model.safetensors"
"""Under ``--output-dir``: the initial weights of a run without ``--pretrained-checkpoint``."""
LORA_FORMAT_NAME = "lora"
"""``meta.json`` ``format`` of LoRA checkpoints."""


def is_adapter_folder(folder: Path) -> bool:
    """Whether ``folder`` holds LoRA adapters (and a base reference) instead of full weights."""
    return (Path(folder) / ADAPTER_CONFIG).is_file()
