"""Entry-point specs of the pi0.5 plugins (``embodied.models``: ``pi05``, ``pi05_tiny``). Imports no torch."""

from __future__ import annotations

from embodied_models.pi05.config import Pi05DataConfig, Pi05ModelConfig
from embodied_models.vla.spec import vla_model_spec

__all__ = ["PI05", "PI05_TINY"]

_CONFIGS = dict(model_config=Pi05ModelConfig, data_config=Pi05DataConfig)

PI05 = vla_model_spec(
    "embodied_models.pi05", "pi05",
    "pi0.5 (PaliGemma-3B + 300M flow-matching action expert, ~3.35B params); needs --tokenizer-path", **_CONFIGS)

PI05_TINY = vla_model_spec(
    "embodied_models.pi05", "pi05_tiny",
    "pi0.5 architecture at CPU size (~0.18M params, 56 px, built-in tokenizer) for tests and demos", **_CONFIGS)
