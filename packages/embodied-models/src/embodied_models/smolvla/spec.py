"""Entry-point specs of the SmolVLA plugins (``embodied.models``: ``smolvla``, ``smolvla_tiny``). Imports no torch."""

from __future__ import annotations

from embodied_models.smolvla.config import SmolVLADataConfig, SmolVLAModelConfig
from embodied_models.vla.spec import vla_model_spec

__all__ = ["SMOLVLA", "SMOLVLA_TINY"]

_CONFIGS = dict(model_config=SmolVLAModelConfig, data_config=SmolVLADataConfig)

SMOLVLA = vla_model_spec(
    "embodied_models.smolvla", "smolvla",
    "SmolVLA (SmolVLM2-500M cut to 16 layers + cross-attending flow-matching action expert, 450M params, "
    "lerobot/smolvla_base layout); needs --tokenizer-path", **_CONFIGS)

SMOLVLA_TINY = vla_model_spec(
    "embodied_models.smolvla", "smolvla_tiny",
    "SmolVLA architecture at CPU size (~0.4M params, 64 px, built-in byte tokenizer) for tests and demos", **_CONFIGS)
