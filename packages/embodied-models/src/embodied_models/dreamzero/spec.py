"""Entry-point specs of DreamZero (light: no torch).

Presets: ``dreamzero_wan22_5b`` (Wan2.2-TI2V-5B, DROID), ``dreamzero_wan21_14b`` (Wan2.1-I2V-14B, DROID) and
``dreamzero_tiny`` (CPU tests, LIBERO layout), all training with LoRA by default (``--no-use-lora`` for full
fine-tuning). LoongForge's model names are aliases (module :mod:`embodied_models.dreamzero.aliases`, so
``embodied plugins`` shows them as such) with the LoRA default their name says.
"""

from __future__ import annotations

from embodied_core.registry.specs import ModelSpec, PluginSpec
from embodied_models.dreamzero.config import DreamZeroModelConfig
from embodied_models.dreamzero.data.config import DreamZeroDataConfig

__all__ = ["DREAMZERO_TINY", "DREAMZERO_TRAINER", "DREAMZERO_WAN21_14B", "DREAMZERO_WAN22_5B", "dreamzero_spec"]

_FACTORY = "embodied_models.dreamzero.modeling:build_model"
_TRANSFORMS = "embodied_models.dreamzero.transforms:make_transforms"
_REQUIRES = ("diffusers", "transformers", "peft")
_HINT = "pip install 'diffusers>=0.42' 'transformers>=5.24' peft (or embodied-core[lora])"


def dreamzero_spec(name: str, yaml: str, description: str) -> ModelSpec:
    """A DreamZero preset: the shared factory / transforms / checks with its own default YAML."""
    return ModelSpec(name=name, description=description, factory=_FACTORY, model_config=DreamZeroModelConfig,
                     data_config=DreamZeroDataConfig, default_yaml=f"embodied_models.dreamzero:{yaml}.yaml",
                     transforms=_TRANSFORMS, requires=_REQUIRES, install_hint=_HINT,
                     checks=("embodied_models.dreamzero.checks:check_run_config",), uses_flags=("tokenizer_path",),
                     policy="embodied_models.dreamzero.policy:DreamZeroPolicy", needs_task=True)


DREAMZERO_WAN22_5B = dreamzero_spec("dreamzero_wan22_5b", "dreamzero_wan22_5b",
                                    "DreamZero on Wan2.2-TI2V-5B (DROID geometry), LoRA by default")
DREAMZERO_WAN21_14B = dreamzero_spec("dreamzero_wan21_14b", "dreamzero_wan21_14b",
                                     "DreamZero on Wan2.1-I2V-14B (DROID geometry), LoRA by default")
DREAMZERO_TINY = dreamzero_spec("dreamzero_tiny", "dreamzero_tiny",
                                "DreamZero with a 2-block toy DiT and toy encoders for CPU tests (LIBERO layout)")

DREAMZERO_TRAINER = PluginSpec(name="dreamzero",
                               description="FinetuneTrainer whose --use-lora also trains DreamZero's state/action "
                               "encoders and action decoder in full (the reference's modules_to_save)",
                               factory="embodied_models.dreamzero.trainer:build_trainer")
