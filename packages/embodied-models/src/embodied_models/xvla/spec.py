"""Entry-point specs of the X-VLA plugins (``embodied.models``: ``xvla``, ``xvla_tiny``). Imports no torch."""

from __future__ import annotations

from embodied_models.vla.spec import vla_model_spec
from embodied_models.xvla.config import XvlaDataConfig, XvlaModelConfig

__all__ = ["XVLA", "XVLA_TINY"]

_CONFIGS = dict(model_config=XvlaModelConfig, data_config=XvlaDataConfig)

XVLA = vla_model_spec(
    "embodied_models.xvla", "xvla",
    "X-VLA-0.9B (Florence-2-large encoder + 1024x24 soft-prompted flow-matching transformer, ~0.88B params); needs "
    "--tokenizer-path (BART)", **_CONFIGS)

XVLA_TINY = vla_model_spec(
    "embodied_models.xvla", "xvla_tiny",
    "X-VLA architecture at CPU size (~0.1M params, 48 px, built-in byte tokenizer) for tests and demos", **_CONFIGS)
