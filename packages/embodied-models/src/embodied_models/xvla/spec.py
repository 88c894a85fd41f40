"""Entry-point specs of the X-VLA plugins (``embodied.models``: ``xvla``, ``xvla_tiny``). Imports no torch."""

from __future__ import annotations

from embodied_core.registry import ModelSpec
from embodied_models.xvla.config import XvlaDataConfig, XvlaModelConfig

__all__ = ["XVLA", "XVLA_TINY"]

# action-space/data rules and the tokenizer requirement span sections, so they are checked on the whole config
_CHECKS = ("embodied_models.xvla.checks:check_run_config",)
_COMMON = dict(
    factory="embodied_models.xvla.modeling:build_model",
    model_config=XvlaModelConfig,
    data_config=XvlaDataConfig,
    transforms="embodied_models.xvla.transforms:make_transforms",
    requires=("transformers",),
    install_hint="pip install 'transformers>=5.24,<5.25'",
    uses_flags=("tokenizer_path",),
    checks=_CHECKS,
    needs_task=True,
)

XVLA = ModelSpec(
    name="xvla",
    description="X-VLA-0.9B (Florence-2-large encoder + 1024x24 soft-prompted flow-matching transformer, ~0.88B "
                "params); needs --tokenizer-path (BART)",
    default_yaml="embodied_models.xvla:xvla.yaml",
    **_COMMON,
)

XVLA_TINY = ModelSpec(
    name="xvla_tiny",
    description="X-VLA architecture at CPU size (~0.1M params, 48 px, built-in byte tokenizer) for tests and demos",
    default_yaml="embodied_models.xvla:xvla_tiny.yaml",
    **_COMMON,
)
