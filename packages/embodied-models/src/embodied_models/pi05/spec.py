"""Entry-point specs of the pi0.5 plugins (``embodied.models``: ``pi05``, ``pi05_tiny``). Imports no torch."""

from __future__ import annotations

from embodied_core.registry import ModelSpec
from embodied_models.pi05.config import Pi05DataConfig, Pi05ModelConfig

__all__ = ["PI05", "PI05_TINY"]

# model/data size rules and the tokenizer requirement span sections, so they are checked on the whole config
_CHECKS = ("embodied_models.pi05.checks:check_run_config",)

PI05 = ModelSpec(
    name="pi05",
    description="pi0.5 (PaliGemma-3B + 300M flow-matching action expert, ~3.35B params); needs --tokenizer-path",
    factory="embodied_models.pi05.modeling:build_model",
    model_config=Pi05ModelConfig,
    data_config=Pi05DataConfig,
    default_yaml="embodied_models.pi05:pi05.yaml",
    transforms="embodied_models.pi05.transforms:make_transforms",
    requires=("transformers",),
    install_hint="pip install 'transformers>=5.24,<5.25'",
    uses_flags=("tokenizer_path",),
    checks=_CHECKS,
    needs_task=True,
)

PI05_TINY = ModelSpec(
    name="pi05_tiny",
    description="pi0.5 architecture at CPU size (~0.18M params, 56 px, built-in tokenizer) for tests and demos",
    factory="embodied_models.pi05.modeling:build_model",
    model_config=Pi05ModelConfig,
    data_config=Pi05DataConfig,
    default_yaml="embodied_models.pi05:pi05_tiny.yaml",
    transforms="embodied_models.pi05.transforms:make_transforms",
    requires=("transformers",),
    install_hint="pip install 'transformers>=5.24,<5.25'",
    uses_flags=("tokenizer_path",),
    checks=_CHECKS,
    needs_task=True,
)
