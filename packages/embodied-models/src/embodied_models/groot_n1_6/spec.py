"""Entry-point specs of the GR00T N1.6 plugins (``embodied.models``: ``groot_n1_6``, ``groot_n1_6_tiny``;
``embodied.trainers``: ``groot_n1_6``). Imports no torch."""

from __future__ import annotations

from embodied_core.registry.specs import ModelSpec, PluginSpec
from embodied_models.groot_n1_6.config import GrootN16DataConfig, GrootN16ModelConfig
from embodied_models.vla.spec import vla_model_spec

__all__ = ["GROOT_N1_6", "GROOT_N1_6_TINY", "GROOT_N1_6_TRAINER"]

_CONFIGS = dict(model_config=GrootN16ModelConfig, data_config=GrootN16DataConfig,
                requires=("transformers", "diffusers"),
                install_hint="pip install 'transformers>=5.24,<5.25' 'diffusers>=0.42,<0.43'")


def _spec(name: str, description: str) -> ModelSpec:
    return vla_model_spec("embodied_models.groot_n1_6", name, description, **_CONFIGS)


GROOT_N1_6 = _spec("groot_n1_6", "NVIDIA GR00T N1.6 (Eagle3 backbone: SigLIP2 + Qwen3-1.7B cut to 16 layers; "
                   "AlternateVL DiT flow-matching head, ~3.3B params); needs --tokenizer-path")
GROOT_N1_6_TINY = _spec("groot_n1_6_tiny", "GR00T N1.6 architecture at CPU size (2-layer SigLIP2 with tile windows "
                        "and 2-D RoPE, 2-layer Qwen3, 4-block DiT, 32 px views, built-in tiny processor) for tests and "
                        "demos")

GROOT_N1_6_TRAINER = PluginSpec(
    name="groot_n1_6", description="FinetuneTrainer that seeds and checkpoints GR00T N1.6's noise/time generator and "
    "names groot_n1_7-strategy cameras by their modality video keys",
    factory="embodied_models.groot_n1_6.trainer:build_trainer")
