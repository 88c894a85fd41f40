"""Entry-point specs of the GR00T N1.7 plugins (``embodied.models``: ``groot_n1_7``, ``groot_n1_7_tiny``;
``embodied.trainers``: ``groot_n1_7``). Imports no torch."""

from __future__ import annotations

from embodied_core.registry.specs import ModelSpec, PluginSpec
from embodied_models.groot_n1_7.config import GrootDataConfig, GrootModelConfig
from embodied_models.vla.spec import vla_model_spec

__all__ = ["GROOT_N1_7", "GROOT_N1_7_TINY", "GROOT_N1_7_TRAINER"]

_CONFIGS = dict(model_config=GrootModelConfig, data_config=GrootDataConfig, requires=("transformers", "diffusers"),
                install_hint="pip install 'transformers>=5.24,<5.25' 'diffusers>=0.42,<0.43'")


def _spec(name: str, description: str) -> ModelSpec:
    return vla_model_spec("embodied_models.groot_n1_7", name, description, **_CONFIGS)


GROOT_N1_7 = _spec("groot_n1_7", "NVIDIA GR00T N1.7 (Cosmos-Reason2-2B Qwen3-VL backbone cut to 16 layers + "
                   "multi-embodiment flow-matching DiT, ~3.45B params); needs --tokenizer-path")
GROOT_N1_7_TINY = _spec("groot_n1_7_tiny", "GR00T N1.7 architecture at CPU size (2-layer Qwen3-VL, 4-block DiT, "
                        "32 px views, built-in tiny processor) for tests and demos")

GROOT_N1_7_TRAINER = PluginSpec(
    name="groot_n1_7", description="FinetuneTrainer that seeds and checkpoints GR00T N1.7's noise/time/state-dropout "
    "generator and names groot_n1_7-strategy cameras by their modality video keys",
    factory="embodied_models.groot_n1_7.trainer:build_trainer")
