"""Entry-point specs of the SmolVLA plugins (``embodied.models``: ``smolvla``, ``smolvla_tiny``). Imports no torch."""

from __future__ import annotations

from embodied_core.registry import ModelSpec
from embodied_models.smolvla.config import SmolVLADataConfig, SmolVLAModelConfig

__all__ = ["SMOLVLA", "SMOLVLA_TINY"]

# model/data size rules and the tokenizer requirement span sections, so they are checked on the whole config
_CHECKS = ("embodied_models.smolvla.checks:check_run_config",)
_COMMON = dict(
    factory="embodied_models.smolvla.modeling:build_model",
    model_config=SmolVLAModelConfig,
    data_config=SmolVLADataConfig,
    transforms="embodied_models.smolvla.transforms:make_transforms",
    requires=("transformers",),
    install_hint="pip install 'transformers>=5.24,<5.25'",
    uses_flags=("tokenizer_path",),
    checks=_CHECKS,
    needs_task=True,
)

SMOLVLA = ModelSpec(
    name="smolvla",
    description="SmolVLA (SmolVLM2-500M cut to 16 layers + cross-attending flow-matching action expert, 450M "
                "params, lerobot/smolvla_base layout); needs --tokenizer-path",
    default_yaml="embodied_models.smolvla:smolvla.yaml",
    **_COMMON,
)

SMOLVLA_TINY = ModelSpec(
    name="smolvla_tiny",
    description="SmolVLA architecture at CPU size (~0.4M params, 64 px, built-in byte tokenizer) for tests and demos",
    default_yaml="embodied_models.smolvla:smolvla_tiny.yaml",
    **_COMMON,
)
